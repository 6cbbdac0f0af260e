import Foundation
import Glibc
import HTTPServer
import TestSupport

/// A test client on a real socket that keeps its connection and reads framed responses.
final class RawConnection {
    let fd: Int32
    private var buffer: [UInt8] = []

    struct Response {
        let status: Int
        let headers: [String: String]
        let body: String
        let raw: String
    }

    init(port: UInt16, timeout: Int = 5, source: String? = nil) throws {
        guard let fd = connectLoopback(port: port, receiveTimeout: timeout, source: source) else {
            throw SystemErrorForTests.connect
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Reads more bytes; false when the peer closed (or the read timed out).
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    /// Reads one response framed by Content-Length; `nil` if the connection closed first.
    func readResponse(headRequest: Bool = false) -> Response? {
        let terminator = Array("\r\n\r\n".utf8)
        while buffer.firstRange(of: terminator) == nil { guard fill() else { return nil } }
        let end = buffer.firstRange(of: terminator)!.upperBound
        let head = String(decoding: buffer[..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let status = Int(lines.removeFirst().split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[parts[0].lowercased()] = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        }
        let length = headRequest || status == 100 ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < end + length { guard fill() else { return nil } }
        let body = String(decoding: buffer[end..<(end + length)], as: UTF8.self)
        let raw = String(decoding: buffer[..<(end + length)], as: UTF8.self)
        buffer.removeFirst(end + length)
        return Response(status: status, headers: headers, body: body, raw: raw)
    }

    /// True when the server has closed the connection (reads return end of file).
    func isClosedByPeer() -> Bool {
        while fill() {}
        var chunk = [UInt8](repeating: 0, count: 16)
        return recv(fd, &chunk, chunk.count, 0) == 0
    }
}

enum SystemErrorForTests: Error { case connect }
