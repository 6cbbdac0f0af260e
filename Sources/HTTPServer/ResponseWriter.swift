internal import Foundation
internal import Telemetry

/// Serialises responses: status line, `Date`, `Content-Length`, `Connection`, the handler's headers.
enum ResponseWriter {
    /// - Parameter requestID: written as `X-Request-Id` (straight into the bytes: no header array copy).
    static func append(
        _ response: HTTPResponse, to output: inout [UInt8], date: [UInt8], keepAlive: Bool, includeBody: Bool,
        requestID: String? = nil
    ) {
        if response.status == 200 {
            output.append(contentsOf: okStatusLine)
        } else {
            output.append(contentsOf: "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n".utf8)
        }
        output.append(contentsOf: datePrefix)
        output.append(contentsOf: date)
        output.append(contentsOf: contentLengthPrefix)
        appendDecimal(response.body.count, to: &output)
        output.append(contentsOf: crlf)
        if !keepAlive { output.append(contentsOf: connectionClose) }
        if let requestID, requestID != "-" {
            output.append(contentsOf: requestIDPrefix)
            output.append(contentsOf: requestID.utf8)
            output.append(contentsOf: crlf)
        }
        for (name, value) in response.headers {
            output.append(contentsOf: name.utf8)
            output.append(contentsOf: ": ".utf8)
            output.append(contentsOf: value.utf8)
            output.append(contentsOf: "\r\n".utf8)
        }
        output.append(contentsOf: "\r\n".utf8)
        if includeBody { output.append(contentsOf: response.body) }
    }

    private static let okStatusLine = Array("HTTP/1.1 200 OK\r\n".utf8)
    private static let datePrefix = Array("Date: ".utf8)
    private static let contentLengthPrefix = Array("\r\nContent-Length: ".utf8)
    private static let connectionClose = Array("Connection: close\r\n".utf8)
    private static let crlf = Array("\r\n".utf8)
    private static let requestIDPrefix = Array("X-Request-Id: ".utf8)

    private static func appendDecimal(_ value: Int, to output: inout [UInt8]) {
        if value >= 10 { appendDecimal(value / 10, to: &output) }
        output.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    /// An error answer in the service's JSON shape.
    static func error(_ status: Int, code: ErrorCode, message: String, extraHeaders: [(String, String)] = [])
        -> HTTPResponse
    {
        let body =
            #"{"error":{"code":"# + Logger.quoted(code.rawValue) + #","message":"# + Logger.quoted(message) + "}}"
        return HTTPResponse(
            status: status, headers: [("Content-Type", "application/json")] + extraHeaders, body: Array(body.utf8)
        )
    }

    /// The IMF-fixdate of `seconds` since 1970 (`Tue, 01 Dec 2026 10:00:00 GMT`).
    static func httpDate(_ seconds: Int) -> [UInt8] {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return Array(formatter.string(from: Date(timeIntervalSince1970: Double(seconds))).utf8)
    }
}
