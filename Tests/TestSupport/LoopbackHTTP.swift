package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 exchange over a fresh loopback connection (`Connection: close`), for tests that
/// drive a real server: no client library between the test and the bytes.
package enum LoopbackHTTP {
    package struct Response {
        package let status: Int
        package let headers: [String: String]
        package let body: Data

        /// The body as a JSON object, or empty.
        package var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        }

        package var text: String { String(decoding: body, as: UTF8.self) }
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
        package init(description: String) { self.description = description }
    }

    /// Sends a request; a `json` body is serialized with `Content-Type: application/json`, a `body`
    /// is sent as it is (with whatever `headers` say of it).
    package static func send(
        port: UInt16, _ method: String, _ path: String, bearer: String? = nil, json: Any? = nil,
        headers: [String: String] = [:], body rawBody: Data? = nil
    ) throws -> Response {
        guard let fd = connectLoopback(port: port, receiveTimeout: 10) else {
            throw Failure(description: "nothing listens on 127.0.0.1:\(port)")
        }
        defer { close(fd) }
        var body = rawBody ?? Data()
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if let bearer { head += "Authorization: Bearer \(bearer)\r\n" }
        if let json {
            body = try JSONSerialization.data(withJSONObject: json)
            head += "Content-Type: application/json\r\n"
        }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        let request = Array(head.utf8) + Array("\r\n".utf8) + Array(body)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw Failure(description: "send failed") }
            sent += count
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        guard let split = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else {
            throw Failure(description: "no complete response to \(method) \(path)")
        }
        let lines = String(decoding: bytes[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[line[..<colon].lowercased()] = value
        }
        return Response(status: status, headers: headers, body: Data(bytes[split.upperBound...]))
    }

    /// Waits until `GET /healthz` answers 200, up to `timeout` seconds. The default is a ceiling for
    /// a process that never comes up, not a measure: a start on a machine busy with the other suites
    /// (migrations, a PostgreSQL pool, key files) may take many times its usual second.
    package static func waitUntilHealthy(port: UInt16, timeout: Double = 120) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let response = try? send(port: port, "GET", "/healthz"), response.status == 200 { return }
            usleep(50_000)
        }
        throw Failure(description: "deliveryd did not become healthy on port \(port)")
    }
}
