public import HTTPServer

/// The HTTP face of deliveryd: turns requests into answers.
public struct DeliveryService: Sendable {
    public init() {}

    /// Answers one request.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        switch request.path {
        case "/healthz":
            guard request.method == "GET" || request.method == "HEAD" else {
                var response = APIError.methodNotAllowed().response
                response.headers.append(("Allow", "GET, HEAD"))
                return response
            }
            return .json(200, Array(#"{"status":"ok"}"#.utf8))
        default:
            return APIError.notFound().response
        }
    }
}
