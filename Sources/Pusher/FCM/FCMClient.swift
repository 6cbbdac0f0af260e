public import Foundation
import Telemetry

/// One message as the FCM client sends it.
public struct FCMRequest: Sendable, Hashable {
    /// `https://host[:port]` of the FCM API (`https://fcm.googleapis.com`, or a setting's).
    public var baseURL: String
    public var projectID: String
    /// The `messages:send` body (`AndroidLiveUpdate.requestBody`), which names the device.
    public var body: [UInt8]
    public var accessToken: String

    public init(baseURL: String, projectID: String, body: [UInt8], accessToken: String) {
        self.baseURL = baseURL
        self.projectID = projectID
        self.body = body
        self.accessToken = accessToken
    }
}

/// What FCM answered, or why nothing came back.
public struct FCMResponse: Sendable, Hashable {
    /// `nil` when no HTTP answer arrived (`transportError` says why).
    public let status: Int?
    /// FCM's own error code (`UNREGISTERED`, `QUOTA_EXCEEDED`, …) when the answer has one, else the
    /// API's status (`UNAUTHENTICATED`, `PERMISSION_DENIED`, …).
    public let errorCode: String?
    /// The request field an `INVALID_ARGUMENT` names (`message.token`: the device's token is bad).
    public let invalidField: String?
    /// On success, the message's name (`projects/{project}/messages/{id}`), kept in the push log.
    public let messageName: String?
    /// The wait FCM asked for (`Retry-After`), in seconds.
    public let retryAfter: Int?
    public let transportError: String?
    public let latencySeconds: Double

    public init(
        status: Int?, errorCode: String? = nil, invalidField: String? = nil, messageName: String? = nil,
        retryAfter: Int? = nil, transportError: String? = nil, latencySeconds: Double = 0
    ) {
        self.status = status
        self.errorCode = errorCode
        self.invalidField = invalidField
        self.messageName = messageName
        self.retryAfter = retryAfter
        self.transportError = transportError
        self.latencySeconds = latencySeconds
    }
}

/// The FCM HTTP v1 client: `POST …/v1/projects/{project}/messages:send` as HTTP/2 streams on one
/// `CurlMultiplexer`, authenticated with an OAuth 2 access token.
///
/// - Important: Not `Sendable`: a pusher's worker thread owns it and calls `send` from there.
public final class FCMClient {
    private let multiplexer: CurlMultiplexer

    /// Connections opened since start (new TLS handshakes).
    public var connectionsOpened: Int { multiplexer.connectionsOpened }

    /// - Parameters:
    ///   - caFile: CA bundle to trust (tests point it at their own CA); `nil` for the system store.
    ///   - timeoutMilliseconds: per request, connection included.
    /// - Throws: `PusherStartupError` when libcurl lacks HTTP/2 or the multi handle cannot be made.
    public init(caFile: String? = nil, timeoutMilliseconds: Int = 10_000, connectionsPerHost: Int = 4)
        throws(PusherStartupError)
    {
        multiplexer = try CurlMultiplexer(
            caFile: caFile, timeoutMilliseconds: timeoutMilliseconds, connectionsPerHost: connectionsPerHost,
            maximumIdleSeconds: 3600, keptHeaders: ["retry-after"])
    }

    /// Sends a batch and waits for every answer; results come back in the order of `requests`.
    public func send(_ requests: [FCMRequest], now: Date = Date()) -> [FCMResponse] {
        let posts = requests.map { request in
            CurlMultiplexer.Request(
                url: request.baseURL + "/v1/projects/" + request.projectID + "/messages:send",
                headers: ["authorization: Bearer " + request.accessToken, "content-type: application/json"],
                body: request.body)
        }
        return multiplexer.perform(posts).map { Self.response($0, now: now) }
    }

    /// Reads FCM's answer: a success names the message; an error is
    /// `{"error": {"code", "status", "details": [{"@type": "…FcmError", "errorCode"}, {"@type": "…BadRequest",
    /// "fieldViolations": [{"field"}]}]}}`.
    static func response(_ answer: CurlMultiplexer.Answer, now: Date) -> FCMResponse {
        guard answer.transportError == nil else {
            return FCMResponse(
                status: nil, transportError: answer.transportError, latencySeconds: answer.latencySeconds)
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any] ?? [:]
        let retryAfter = answer.headers["retry-after"].flatMap { RetryAfter.seconds(Substring($0), now: now) }
        guard answer.status != 200 else {
            return FCMResponse(
                status: 200, messageName: object["name"] as? String, latencySeconds: answer.latencySeconds)
        }
        let error = object["error"] as? [String: Any] ?? [:]
        let details = error["details"] as? [[String: Any]] ?? []
        let fcmCode = details.first { ($0["@type"] as? String)?.hasSuffix("FcmError") == true }?["errorCode"]
        let violations = details.compactMap { $0["fieldViolations"] as? [[String: Any]] }.joined()
        return FCMResponse(
            status: answer.status, errorCode: (fcmCode as? String) ?? (error["status"] as? String),
            invalidField: violations.first?["field"] as? String, retryAfter: retryAfter,
            latencySeconds: answer.latencySeconds)
    }
}
