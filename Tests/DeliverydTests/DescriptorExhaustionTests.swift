import Foundation
import Glibc
import TestScheduling
import TestSupport
import Testing

/// The real binary under a small open-file limit, flooded with more connections than it may hold.
@Suite("Descriptor exhaustion", .serialized, .heavy)
struct DescriptorExhaustionTests {
    static let adminKey = "descriptors-admin-key-0123456789"

    /// A connection held by the test: one request answered on it, or refused (closed at once).
    final class HeldConnection {
        let fd: Int32
        init?(port: UInt16, source: String) {
            guard let fd = connectLoopback(port: port, receiveTimeout: 10, source: source) else { return nil }
            self.fd = fd
        }
        deinit { close(fd) }

        /// Sends `GET path` and reads the answer's head and body (Content-Length framed); `nil` when
        /// the server closed the connection instead.
        func get(_ path: String, bearer: String? = nil) -> (status: Int, body: String)? {
            var request = "GET \(path) HTTP/1.1\r\nHost: t\r\n"
            if let bearer { request += "Authorization: Bearer \(bearer)\r\n" }
            let bytes = Array((request + "\r\n").utf8)
            guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count
            else { return nil }
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                    let head = String(decoding: received[..<end.lowerBound], as: UTF8.self).lowercased()
                    let length =
                        head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        ?? 0
                    if received.count >= end.upperBound + length {
                        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                        return (status, String(decoding: received[end.upperBound...], as: UTF8.self))
                    }
                }
                let count = recv(fd, &chunk, chunk.count, 0)
                guard count > 0 else { return nil }
                received.append(contentsOf: chunk[0..<count])
            }
        }
    }

    /// Under `prlimit --nofile=600:600` the connection limit falls to what the descriptors allow
    /// (600 less the 256 kept for the rest of the process); 700 connections from 14 addresses get
    /// that many answers and the rest are closed at once, the process keeps answering on the
    /// connections it holds, reports what it refused, serves new clients once slots are free, and
    /// stops cleanly. (It used to die of SIGILL in libdispatch, out of descriptors.)
    @Test func moreConnectionsThanDescriptorsLeaveTheProcessServing() throws {
        var own = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        own.rlim_cur = own.rlim_max  // this test process holds 700 sockets beside the other suites' descriptors
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)

        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"], openFileLimit: 600)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)

        var held: [HeldConnection] = []
        var refused = 0
        for index in 0..<700 {
            let connection = try #require(HeldConnection(port: server.port, source: "127.0.2.\(1 + index % 14)"))
            if connection.get("/healthz")?.status == 200 { held.append(connection) } else { refused += 1 }
        }
        #expect(server.process.isRunning)
        #expect(held.count == 600 - 256, "the limit the descriptors allow")
        #expect(refused == 700 - held.count)

        // Every held connection still answers, and the metrics say what happened.
        #expect(held.allSatisfy { $0.get("/healthz")?.status == 200 })
        let metrics = try #require(held[0].get("/metrics", bearer: Self.adminKey))
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("deliveryd_http_connection_limit 344\n"))
        #expect(metrics.body.contains("deliveryd_http_connections_refused_total{reason=\"limit\"} \(refused)\n"))

        // Slots given back serve new clients.
        held.removeAll()
        var served = false
        for _ in 0..<400 where !served {
            served = HeldConnection(port: server.port, source: "127.0.2.200")?.get("/healthz")?.status == 200
            if !served { usleep(50_000) }
        }
        #expect(served)
        #expect(server.stop() == 0, "a clean stop, not a crash")
        let lowered = server.logLines().first { $0["message"] as? String == "http.connection_limit_lowered" }
        #expect(lowered?["http.connection_limit"] as? Double == 344)
    }
}
