import Foundation
import Synchronization
import Telemetry
import Testing

@testable import HTTPServer

@Suite("Access log")
struct AccessLogTests {
    private static let discard = LogOutput { _ in 0 }

    private func line(
        path: String, route: String?, requestID: String = "r-1", nanoseconds: UInt64 = 1_234_567
    ) throws -> (text: String, fields: [String: Any]) {
        var buffer = AccessLogBuffer(
            configuration: AccessLogConfiguration(output: Self.discard, pathsLoggedAsRoute: ["/v1/customers/"]))
        buffer.append(
            method: "GET", path: path, route: route, requestID: requestID, status: 200, size: 1234,
            durationNanoseconds: nanoseconds)
        #expect(buffer.lines == 1)
        let text = String(decoding: buffer.bytes, as: UTF8.self)
        #expect(text.hasSuffix("}\n") && text.filter { $0 == "\n" }.count == 1)
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(buffer.bytes)) as? [String: Any])
        return (text, fields)
    }

    /// The keys of a JSON object line in the order they are written.
    private func keyOrder(_ text: String) -> [String] {
        text.matches(of: /"([a-z_.]+)":/).map { String($0.output.1) }
    }

    /// The same fields, values and key order as the application logger's line for the same request.
    @Test func linesAreTheLoggersJSON() throws {
        let (text, fields) = try line(path: "/v1/orders/o-1", route: "/v1/orders/{id}")
        let expected: [String: Logger.Value] = [
            "request.id": "r-1", "http.request.method": "GET", "url.path": "/v1/orders/o-1",
            "http.response.status_code": 200, "http.response.size": 1234,
            "http.server.request.duration": .number(0.001234), "http.route": "/v1/orders/{id}",
        ]
        let reference = Logger.line(
            time: Date(), level: .info, label: "http", message: "http.request", fields: expected)
        let referenceFields = try #require(
            try JSONSerialization.jsonObject(with: Data(reference.utf8)) as? [String: Any])
        #expect(keyOrder(text) == keyOrder(reference))
        for key in referenceFields.keys where key != "time" {
            #expect("\(fields[key] ?? "missing")" == "\(referenceFields[key]!)", "field \(key)")
        }
        let time = try #require(fields["time"] as? String)
        let parsed = try #require(
            try? Date(time, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)))
        #expect(abs(parsed.timeIntervalSinceNow) < 60)
        #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
    }

    @Test func durationsAndSizesAreExact() throws {
        #expect(try line(path: "/", route: nil, nanoseconds: 0).fields["http.server.request.duration"] as? Double == 0)
        let slow = try line(path: "/", route: nil, nanoseconds: 12_000_345_678).text
        #expect(slow.contains(#""http.server.request.duration":12.000345,"#))
        #expect(!slow.contains("http.route"))
    }

    /// A person's identifier in a path is not logged; anything odd in a path is escaped, not broken.
    @Test func customerPathsAreLoggedAsTheirRouteAndTextIsEscaped() throws {
        let customer = try line(
            path: "/v1/customers/ana@example/push-to-start/d-1",
            route: "/v1/customers/{customerId}/push-to-start/{deviceId}")
        #expect(customer.fields["url.path"] as? String == "/v1/customers/{customerId}/push-to-start/{deviceId}")
        #expect(!customer.text.contains("ana@example"))
        let odd = try line(path: "/a\"b\\c\u{1}d/é", route: nil, requestID: "x\"y")
        #expect(odd.fields["url.path"] as? String == "/a\"b\\c\u{1}d/é")
        #expect(odd.fields["request.id"] as? String == "x\"y")
    }
}

@Suite("Log output", .serialized)
struct LogOutputTests {
    /// A destination that holds its first batch until released, and keeps what it was given.
    final class HeldDestination: Sendable {
        let release = DispatchSemaphore(value: 0)
        let received = Mutex<[UInt8]>([])
        let entered = DispatchSemaphore(value: 0)
        let first = Atomic<Bool>(true)

        func write(_ batch: [UInt8]) -> Int {
            if first.exchange(false, ordering: .relaxed) {
                entered.signal()
                release.wait()
            }
            received.withLock { $0 += batch }
            return 0
        }

        var lines: [String] {
            received.withLock { String(decoding: $0, as: UTF8.self) }.split(separator: "\n").map(String.init)
        }
    }

    /// Past its capacity the output drops lines, counts them, and says so once the writer catches up;
    /// `submit` never waits for the stuck destination.
    @Test func dropsAreCountedAndSaid() throws {
        let destination = HeldDestination()
        let output = LogOutput(capacity: 100) { destination.write($0) }
        #expect(output.submit(line: "first\n"))
        #expect(destination.entered.wait(timeout: .now() + 30) == .success)  // the writer holds "first"
        var accepted = 0
        var refused = 0
        for index in 0..<50 {
            if output.submit(line: "line \(index)\n") { accepted += 1 } else { refused += 1 }
        }
        #expect(accepted > 0 && refused > 0)
        #expect(output.droppedLines == refused)
        destination.release.signal()
        #expect(output.flush(timeout: 30))
        let lines = destination.lines
        #expect(lines.count == 1 + accepted + 1)
        let notice = try #require(
            lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(notice["message"] as? String == "log.lines_dropped" && notice["log.dropped_lines"] as? Int == refused)
        #expect(output.submit(line: "after\n") && output.flush(timeout: 30) && destination.lines.last == "after")
    }

    /// Lines submitted together are written together: the writer lets them gather before it writes,
    /// and a flush has it write at once instead of waiting out the gathering.
    @Test func linesGatherIntoOneWriteAndAFlushDoesNotWait() {
        let batches = Mutex<[[UInt8]]>([])
        let output = LogOutput(capacity: 1 << 20, gathering: 3600) { batch in
            batches.withLock { $0.append(batch) }
            return 0
        }
        for index in 0..<100 { #expect(output.submit(line: "line \(index)\n")) }
        #expect(output.flush(timeout: 60))
        let written = batches.withLock { $0 }
        #expect(written.count == 1)
        #expect(String(decoding: written.joined(), as: UTF8.self).split(separator: "\n").count == 100)
    }

    /// A loop whose log output is stuck still answers every request; the lines it could not keep are counted.
    @Test func aStuckLogDoesNotStopTheLoop() throws {
        let destination = HeldDestination()
        let output = LogOutput(capacity: 8 * 1024) { destination.write($0) }
        var router = Router()
        router.add("GET", "/healthz", execution: .inline) { _ in HTTPResponse(status: 200, body: Array("ok".utf8)) }
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(address: ListenAddress.loopback(port: 0), eventLoops: 1),
            router: router, accessLog: AccessLogConfiguration(output: output))
        try server.start()
        let connection = try RawConnection(port: server.boundAddress.port)
        connection.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(connection.readResponse()?.status == 200)
        #expect(destination.entered.wait(timeout: .now() + 30) == .success)
        let requests = 300
        for _ in 1..<requests {
            connection.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(connection.readResponse()?.status == 200)
        }
        #expect(output.droppedLines > 0)
        destination.release.signal()
        server.shutdown()
        #expect(output.flush(timeout: 30))
        let lines = destination.lines
        let logged = lines.filter { $0.contains("\"http.request\"") }.count
        #expect(logged + output.droppedLines == requests)
        #expect(lines.contains { $0.contains("log.lines_dropped") })
    }
}
