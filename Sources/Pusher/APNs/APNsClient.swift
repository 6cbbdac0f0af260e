internal import CCurl
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

/// An HTTP/2 APNs client on one libcurl multi handle: requests of a batch are multiplexed as
/// streams on few long-lived connections, which curl keeps (and reuses across batches) per host.
///
/// - Important: Not `Sendable`: the pusher's worker thread owns it and calls `send` from there.
public final class APNsClient {
    private let multi: UnsafeMutableRawPointer
    private let caFile: String?
    private let timeoutMilliseconds: Int
    private let maximumIdleSeconds: Int
    /// Connections opened since start (new TLS handshakes): few, when multiplexing works.
    public private(set) var connectionsOpened = 0
    /// Transfers of earlier batches, kept to be reused: their handles need no setting up again.
    private var idleTransfers: [CurlTransfer] = []

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
        try CurlLibrary.current.requireHTTP2()
        guard let multi = curl_multi_init() else { throw PusherStartupError("curl_multi_init failed") }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, connectionsPerHost)
        // Streams per connection: the lower of this and what the server's SETTINGS advertise (APNs
        // announces up to 1,000 once a connection is authenticated).
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000)
        // Keep the connections of both environments between batches (curl's default cache shrinks
        // with the handles of a finished batch).
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, connectionsPerHost * 2)
        self.multi = multi
        self.caFile = caFile
        self.timeoutMilliseconds = timeoutMilliseconds
        self.maximumIdleSeconds = maximumIdleSeconds
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    /// Sends a batch and waits for every answer; results come back in the order of `requests`.
    public func send(_ requests: [APNsRequest]) -> [APNsResponse] {
        var results = [APNsResponse?](repeating: nil, count: requests.count)
        var authorizationLines: [String: String] = [:]
        var transfers: [Int: CurlTransfer] = [:]
        for (index, request) in requests.enumerated() {
            // A batch uses one provider token per key: its header line is built once, not per push.
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
            do throws(APNsTransportError) {
                let transfer: CurlTransfer
                if let idle = idleTransfers.popLast() {
                    transfer = idle
                } else {
                    transfer = try CurlTransfer(
                        caFile: caFile, timeoutMilliseconds: timeoutMilliseconds, maximumIdleSeconds: maximumIdleSeconds
                    )
                }
                try transfer.prepare(
                    index: index, url: request.baseURL + "/3/device/" + request.deviceToken, headers: headers,
                    body: request.payload)
                transfers[index] = transfer
                curl_multi_add_handle(multi, transfer.handle)
            } catch {
                results[index] = APNsResponse(
                    status: nil, reason: nil, apnsID: nil, timestamp: nil, transportError: error.description,
                    latencySeconds: 0
                )
            }
        }
        var inFlight = transfers.count
        while inFlight > 0 {
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE else { continue }
                var context: UnsafeMutableRawPointer?
                _ = ccurl_easy_getinfo_pointer(message.pointee.easy_handle, CURLINFO_PRIVATE, &context)
                guard let context else { continue }
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
                let code = message.pointee.data.result
                var connects = 0
                _ = ccurl_easy_getinfo_long(message.pointee.easy_handle, CURLINFO_NUM_CONNECTS, &connects)
                connectionsOpened += connects
                results[transfer.index] = Self.response(transfer, code: code)
                curl_multi_remove_handle(multi, transfer.handle)
                transfers[transfer.index] = nil
                if idleTransfers.count < 4096 { idleTransfers.append(transfer) }
                inFlight -= 1
            }
            if inFlight > 0 { curl_multi_poll(multi, nil, 0, 100, nil) }
        }
        return results.map {
            $0
                ?? APNsResponse(
                    status: nil, reason: nil, apnsID: nil, timestamp: nil, transportError: "lost", latencySeconds: 0)
        }
    }

    private static func response(_ transfer: CurlTransfer, code: CURLcode) -> APNsResponse {
        let latency = Double(DispatchTime.now().uptimeNanoseconds - transfer.started.uptimeNanoseconds) / 1e9
        guard code == CURLE_OK, transfer.status > 0 else {
            return APNsResponse(
                status: nil, reason: nil, apnsID: nil, timestamp: nil,
                transportError: String(cString: curl_easy_strerror(code)), latencySeconds: latency
            )
        }
        var reason: APNsReason?
        var timestamp: Date?
        if !transfer.responseBody.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(transfer.responseBody)) as? [String: Any]
        {
            reason = (object["reason"] as? String).map(APNsReason.init)
            if let milliseconds = object["timestamp"] as? Double {
                timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
            }
        }
        return APNsResponse(
            status: transfer.status, reason: reason, apnsID: transfer.apnsID, timestamp: timestamp,
            transportError: nil, latencySeconds: latency
        )
    }
}
