import DeliveryActivityContract
import FoundationEssentials
public import HTTPServer
import OrderDomain
import Storage

/// An error as clients see it: a stable code, the HTTP status it travels with, a message, and details.
///
/// This is the single place where errors become HTTP statuses; equality compares code and status.
public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable codes of `docs/openapi.yaml`, shared with the HTTP layer's own refusals.
    public typealias Code = ErrorCode

    public let status: Int
    public let code: Code
    public let message: String
    let details: [String: JSONValue]

    init(_ status: Int, _ code: Code, _ message: String, details: [String: JSONValue] = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(status) \(code): \(message)" }

    public static func == (lhs: APIError, rhs: APIError) -> Bool { lhs.code == rhs.code && lhs.status == rhs.status }

    /// `{"error":{"code":…,"message":…,"details":{…}}}`, the body every error response carries.
    public var response: HTTPResponse {
        var error: [String: JSONValue] = ["code": .string(code.rawValue), "message": .string(message)]
        if !details.isEmpty { error["details"] = .object(details) }
        var response = HTTPResponse.json(status, JSONValue.object(["error": .object(error)]).encoded)
        if status == 401 { response.headers.append(("WWW-Authenticate", #"Bearer realm="deliveryd""#)) }
        if status == 503 { response.headers.append(("Retry-After", "5")) }
        if let retryAfter = details["retryAfterSeconds"], case .number(let seconds) = retryAfter {
            response.headers.append(("Retry-After", String(Int(seconds))))
        }
        return response
    }

    static func badRequest(_ message: String) -> APIError { APIError(400, .badRequest, message) }
    /// `429 rate_limited` with `Retry-After`, whole seconds, at least 1.
    static func rateLimited(_ message: String, retryAfter: TimeInterval) -> APIError {
        let seconds = retryAfter.isFinite ? min(86_400, max(1, retryAfter.rounded(.up))) : 86_400
        return APIError(429, .rateLimited, message, details: ["retryAfterSeconds": .number(seconds)])
    }
    static func invalidJSON(_ message: String) -> APIError { APIError(400, .invalidJSON, message) }
    static func unauthorized(_ message: String) -> APIError { APIError(401, .unauthorized, message) }
    static func forbidden(_ message: String) -> APIError { APIError(403, .forbidden, message) }
    static func notFound(_ message: String = "no such resource") -> APIError { APIError(404, .notFound, message) }
    static func conflict(_ message: String) -> APIError { APIError(409, .conflict, message) }
    static func unsupportedMediaType() -> APIError {
        APIError(415, .unsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
    }
    static func idempotencyMismatch() -> APIError {
        APIError(
            422, .idempotencyMismatch, "this Idempotency-Key was used with a different request; use a new key")
    }
    static func internalError() -> APIError { APIError(500, .internal, "internal error") }

    public static func notReady() -> APIError { APIError(503, .notReady, "the database cannot be read") }

    /// `422 validation_failed` naming every bad field.
    static func validationFailed(_ issues: [FieldIssue]) -> APIError {
        APIError(
            422, .validationFailed, issues.map(\.description).joined(separator: "; "),
            details: [
                "fields": .array(
                    issues.map { .object(["field": .string($0.field), "problem": .string($0.problem)]) })
            ]
        )
    }

    /// The HTTP form of a domain refusal.
    init(_ error: OrderError) {
        var details: [String: JSONValue] = [:]
        if let current = error.currentStatus { details["currentStatus"] = .string(current.rawValue) }
        switch error.code {
        case .notFound: self.init(404, .notFound, error.message)
        case .forbidden: self.init(403, .forbidden, error.message)
        case .orderClosed: self.init(409, .orderClosed, error.message, details: details)
        case .illegalTransition: self.init(409, .illegalTransition, error.message, details: details)
        default: self = .validationFailed(error.fieldIssues)
        }
    }

    /// The HTTP form of a storage failure: `429` for a cap reached, `503` when the disk is full or
    /// the database is busy or out of reach (the client may retry), else `500`.
    init(_ error: StorageError) {
        switch error.code {
        case .limitReached:
            self = .rateLimited("\(error.limit?.description ?? error.message): end or remove one first", retryAfter: 60)
        case .full:
            self.init(
                503, .internal, "the database disk is full: nothing was stored; retry later",
                details: ["reason": "disk_full"])
        case .busy:
            self.init(
                503, .internal, "the database is busy: nothing was stored; retry later", details: ["reason": "busy"])
        case .unavailable:
            self.init(
                503, .internal, "the database cannot be reached: nothing was stored; retry later",
                details: ["reason": "unavailable"])
        default:
            self = .internalError()
        }
    }
}
