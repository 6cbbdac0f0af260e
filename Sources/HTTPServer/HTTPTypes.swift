/// The protocol versions the server speaks.
public enum HTTPVersion: Sendable, Hashable {
    case http10
    case http11
}

/// A parsed HTTP request: what a handler sees.
public struct HTTPRequest: Sendable {
    public var method: String
    public var version: HTTPVersion
    /// Whether the connection stays open after the response (HTTP/1.1 without `Connection: close`).
    public var keepAlive: Bool
    /// Values the router took from the path (`{id}` in `/v1/orders/{id}`).
    public var pathParameters: [String: String] = [:]
    /// The client's `X-Request-Id`, or one the server made; echoed in the response and the access log.
    /// Set for pooled handlers; empty for inline ones (health checks, static pages).
    public var requestID = ""
    /// The client's IPv4 address (`127.0.0.1`); set for pooled handlers, `nil` for inline ones and
    /// requests made in-process.
    public var clientAddress: String?
    /// The path without the query string, percent-encoding intact.
    public var path: String
    public var query: String?
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(
        method: String, path: String, query: String? = nil, version: HTTPVersion = .http11, keepAlive: Bool = true,
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) {
        self.method = method
        self.version = version
        self.keepAlive = keepAlive
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The first value of a header, compared case-insensitively as RFC 9110 requires.
    public func header(_ name: String) -> String? {
        let lowercase = name.lowercased()
        return headers.first { HTTPRequestParser.equalsIgnoringCase($0.name, lowercase) }?.value
    }

    /// How many times the header `name` (any case) was sent.
    public func count(ofHeader name: String) -> Int {
        let lowercase = name.lowercased()
        return headers.reduce(0) { $0 + (HTTPRequestParser.equalsIgnoringCase($1.name, lowercase) ? 1 : 0) }
    }
}

/// A response a handler returns; the server adds `Date`, `Content-Length` and `Connection`.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response from already-encoded bytes.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }
}

/// The standard reason phrase of a status code, for the status line.
public func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 200: "OK"
    case 201: "Created"
    case 204: "No Content"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 422: "Unprocessable Content"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 503: "Service Unavailable"
    default: "Status \(status)"
    }
}
