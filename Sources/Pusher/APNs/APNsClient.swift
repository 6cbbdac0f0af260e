public import Foundation

/// One push as the APNs client sends it.
public struct APNsRequest: Sendable, Hashable {
    /// `https://host[:port]` of the token's environment.
    public var baseURL: String
    public var deviceToken: String
    public var topic: String
    public var priority: Int
    public var expiration: Date
    public var collapseID: String?
    public var payload: [UInt8]
    /// The compact provider token (JWT).
    public var providerToken: String

    public init(
        baseURL: String, deviceToken: String, topic: String, priority: Int, expiration: Date, collapseID: String?,
        payload: [UInt8], providerToken: String
    ) {
        self.baseURL = baseURL
        self.deviceToken = deviceToken
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
        self.providerToken = providerToken
    }
}

/// What APNs answered, or why nothing came back.
public struct APNsResponse: Sendable, Hashable {
    /// `nil` when no HTTP answer arrived (`transportError` says why).
    public let status: Int?
    public let reason: APNsReason?
    public let apnsID: String?
    /// For 410: when APNs says the token stopped being valid.
    public let timestamp: Date?
    public let transportError: String?
    public let latencySeconds: Double
}

/// The APNs client: pushes as HTTP/2 POSTs on one `CurlMultiplexer`, whose few long-lived
/// connections carry every batch.
///
/// - Important: Not `Sendable`: the pusher's worker thread owns it and calls `send` from there.
public final class APNsClient {
    private let multiplexer: CurlMultiplexer

    /// Connections opened since start (new TLS handshakes): few, when multiplexing works.
    public var connectionsOpened: Int { multiplexer.connectionsOpened }

    /// - Parameters:
    ///   - caFile: CA bundle to trust (tests point it at their own CA); `nil` for the system store.
    ///   - timeoutMilliseconds: per request, connection included.
    ///   - connectionsPerHost: connections to one APNs host at most; requests beyond what their
    ///     streams allow (each connection takes as many as the server's SETTINGS advertise) wait
    ///     for a free stream instead of opening more connections.
    ///   - maximumIdleSeconds: a connection idle longer is not reused but replaced (default a day:
    ///     APNs asks for connections kept for hours and treats frequent reconnects as abuse).
    /// - Throws: `PusherStartupError` when libcurl lacks HTTP/2 or the multi handle cannot be made.
    public init(
        caFile: String? = nil, timeoutMilliseconds: Int = 10_000, connectionsPerHost: Int = 8,
        maximumIdleSeconds: Int = 86_400
    ) throws(PusherStartupError) {
        multiplexer = try CurlMultiplexer(
            caFile: caFile, timeoutMilliseconds: timeoutMilliseconds, connectionsPerHost: connectionsPerHost,
            maximumIdleSeconds: maximumIdleSeconds, keptHeaders: ["apns-id"])
    }

    /// Sends a batch and waits for every answer; results come back in the order of `requests`.
    public func send(_ requests: [APNsRequest]) -> [APNsResponse] {
        // A batch uses one provider token per key: its header line is built once, not per push.
        var authorizationLines: [String: String] = [:]
        let posts = requests.map { request in
            let authorization: String
            if let cached = authorizationLines[request.providerToken] {
                authorization = cached
            } else {
                authorization = "authorization: bearer " + request.providerToken
                authorizationLines[request.providerToken] = authorization
            }
            var headers = [
                authorization, "apns-push-type: liveactivity",
                "apns-topic: \(request.topic)", "apns-priority: \(request.priority)",
                "apns-expiration: \(Int(request.expiration.timeIntervalSince1970))", "content-type: application/json",
            ]
            if let collapseID = request.collapseID { headers.append("apns-collapse-id: \(collapseID)") }
            return CurlMultiplexer.Request(
                url: request.baseURL + "/3/device/" + request.deviceToken, headers: headers, body: request.payload)
        }
        return multiplexer.perform(posts).map(Self.response)
    }

    private static func response(_ answer: CurlMultiplexer.Answer) -> APNsResponse {
        guard answer.transportError == nil else {
            return APNsResponse(
                status: nil, reason: nil, apnsID: nil, timestamp: nil, transportError: answer.transportError,
                latencySeconds: answer.latencySeconds)
        }
        var reason: APNsReason?
        var timestamp: Date?
        if !answer.body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
        {
            reason = (object["reason"] as? String).map(APNsReason.init)
            if let milliseconds = object["timestamp"] as? Double {
                timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
            }
        }
        return APNsResponse(
            status: answer.status, reason: reason, apnsID: answer.headers["apns-id"], timestamp: timestamp,
            transportError: nil, latencySeconds: answer.latencySeconds
        )
    }
}
