import Foundation
import HTTPServer

#if canImport(Glibc)
    import Glibc
#endif

/// Writes one JSON line per answered request to standard error.
///
/// The entry carries method, path (no query string), status, bytes and duration only, so no
/// credential or private field can reach the log through it.
enum AccessLogWriter {
    @Sendable static func write(_ entry: AccessLogEntry) {
        let time = Date().formatted(.iso8601)
        let line =
            #"{"time":"\#(time)","level":"info","message":"http.request","http.request.method":"\#(entry.method)","#
            + #""url.path":\#(quoted(entry.path)),"http.response.status_code":\#(entry.status),"#
            + #""http.response.size":\#(entry.bytes),"http.server.request.duration":\#(entry.durationSeconds)}"#
            + "\n"
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20: result += "?"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
