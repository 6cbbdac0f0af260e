/// The stable codes of every error body the service sends, from the HTTP layer's own refusals (a
/// request it cannot read, a timeout) to the API's: one table, which clients switch on and
/// `docs/openapi.yaml` lists in full.
public struct ErrorCode: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    private init(_ rawValue: String) { self.rawValue = rawValue }

    public static let badRequest = ErrorCode("bad_request")
    public static let invalidJSON = ErrorCode("invalid_json")
    public static let validationFailed = ErrorCode("validation_failed")
    public static let unauthorized = ErrorCode("unauthorized")
    public static let forbidden = ErrorCode("forbidden")
    public static let notFound = ErrorCode("not_found")
    public static let methodNotAllowed = ErrorCode("method_not_allowed")
    public static let requestTimeout = ErrorCode("request_timeout")
    public static let conflict = ErrorCode("conflict")
    public static let illegalTransition = ErrorCode("illegal_transition")
    public static let orderClosed = ErrorCode("order_closed")
    public static let idempotencyMismatch = ErrorCode("idempotency_mismatch")
    public static let payloadTooLarge = ErrorCode("payload_too_large")
    public static let uriTooLong = ErrorCode("uri_too_long")
    public static let unsupportedMediaType = ErrorCode("unsupported_media_type")
    public static let expectationFailed = ErrorCode("expectation_failed")
    public static let rateLimited = ErrorCode("rate_limited")
    public static let headersTooLarge = ErrorCode("headers_too_large")
    public static let notReady = ErrorCode("not_ready")
    public static let httpVersionNotSupported = ErrorCode("http_version_not_supported")
    public static let `internal` = ErrorCode("internal")

    /// Every code, in the order of the document's list.
    public static let all: [ErrorCode] = [
        .badRequest, .invalidJSON, .validationFailed, .unauthorized, .forbidden, .notFound, .methodNotAllowed,
        .requestTimeout, .conflict, .illegalTransition, .orderClosed, .idempotencyMismatch, .payloadTooLarge,
        .uriTooLong, .unsupportedMediaType, .expectationFailed, .rateLimited, .headersTooLarge, .notReady,
        .httpVersionNotSupported, .internal,
    ]

    /// The code of a refusal the HTTP layer makes before any route runs, by its status.
    static func forRefusal(status: Int) -> ErrorCode {
        switch status {
        case 408: .requestTimeout
        case 413: .payloadTooLarge
        case 414: .uriTooLong
        case 417: .expectationFailed
        case 431: .headersTooLarge
        case 505: .httpVersionNotSupported
        default: .badRequest
        }
    }

    public var description: String { rawValue }
}
