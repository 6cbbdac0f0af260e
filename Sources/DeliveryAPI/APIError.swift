public import HTTPServer

/// An error as clients see it: a stable code, the HTTP status it travels with, and a message.
///
/// This is the single place where errors become HTTP statuses.
public struct APIError: Error, Sendable, Equatable {
    public let status: Int
    public let code: String
    public let message: String

    public init(status: Int, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public static func notFound(_ message: String = "no such resource") -> APIError {
        APIError(status: 404, code: "not_found", message: message)
    }

    public static func methodNotAllowed() -> APIError {
        APIError(status: 405, code: "method_not_allowed", message: "method not allowed on this resource")
    }

    /// `{"error":{"code":…,"message":…}}`, the body every error response carries.
    public var response: HTTPResponse {
        .json(
            status, Array(#"{"error":{"code":\#(JSONText.quoted(code)),"message":\#(JSONText.quoted(message))}}"#.utf8))
    }

    public static func == (lhs: APIError, rhs: APIError) -> Bool { lhs.code == rhs.code && lhs.status == rhs.status }
}

/// Writes JSON string literals by hand for the few fixed bodies that need no encoder.
enum JSONText {
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                result +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
