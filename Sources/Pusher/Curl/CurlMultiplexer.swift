internal import CCurl
internal import Foundation

/// HTTP/2 POSTs in batches on one libcurl multi handle: the requests of a batch are multiplexed as
/// streams on few long-lived connections, which curl keeps (and reuses across batches) per host.
/// The APNs and FCM clients are this plus their own headers and answers.
///
/// Lives only on the thread that sends (not `Sendable`).
final class CurlMultiplexer {
    /// One POST: where, with which header lines, carrying what.
    struct Request {
        let url: String
        let headers: [String]
        let body: [UInt8]
    }

    /// What came back: the status (0 when no answer came), the body, the header values the
    /// multiplexer was asked to keep, or why nothing came.
    struct Answer {
        let status: Int
        let body: [UInt8]
        let headers: [String: String]
        let transportError: String?
        let latencySeconds: Double
    }

    private let multi: UnsafeMutableRawPointer
    private let caFile: String?
    private let timeoutMilliseconds: Int
    private let maximumIdleSeconds: Int
    private let keptHeaders: [String]
    /// Connections opened since start (new TLS handshakes): few, when multiplexing works.
    private(set) var connectionsOpened = 0
    /// Transfers of earlier batches, kept to be reused: their handles need no setting up again.
    private var idleTransfers: [CurlTransfer] = []

    /// - Parameters:
    ///   - caFile: CA bundle to trust (tests point it at their own CA); `nil` for the system store.
    ///   - timeoutMilliseconds: per request, connection included.
    ///   - connectionsPerHost: connections to one host at most; requests beyond what their streams
    ///     allow wait for a free stream instead of opening more connections.
    ///   - maximumIdleSeconds: a connection idle longer is not reused but replaced.
    ///   - keptHeaders: the answer's headers to keep, lower-case names (`apns-id`, `retry-after`).
    /// - Throws: `PusherStartupError` when libcurl lacks HTTP/2 or the multi handle cannot be made.
    init(
        caFile: String?, timeoutMilliseconds: Int, connectionsPerHost: Int, maximumIdleSeconds: Int,
        keptHeaders: [String]
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
        self.keptHeaders = keptHeaders
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    /// Sends a batch and waits for every answer; answers come back in the order of `requests`.
    func perform(_ requests: [Request]) -> [Answer] {
        var answers = [Answer?](repeating: nil, count: requests.count)
        var transfers: [Int: CurlTransfer] = [:]
        for (index, request) in requests.enumerated() {
            do throws(APNsTransportError) {
                let transfer: CurlTransfer
                if let idle = idleTransfers.popLast() {
                    transfer = idle
                } else {
                    transfer = try CurlTransfer(
                        caFile: caFile, timeoutMilliseconds: timeoutMilliseconds,
                        maximumIdleSeconds: maximumIdleSeconds, keptHeaders: keptHeaders)
                }
                try transfer.prepare(index: index, url: request.url, headers: request.headers, body: request.body)
                transfers[index] = transfer
                curl_multi_add_handle(multi, transfer.handle)
            } catch {
                answers[index] = Answer(
                    status: 0, body: [], headers: [:], transportError: error.description, latencySeconds: 0)
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
                var connects = 0
                _ = ccurl_easy_getinfo_long(message.pointee.easy_handle, CURLINFO_NUM_CONNECTS, &connects)
                connectionsOpened += connects
                answers[transfer.index] = Self.answer(transfer, code: message.pointee.data.result)
                curl_multi_remove_handle(multi, transfer.handle)
                transfers[transfer.index] = nil
                if idleTransfers.count < 4096 { idleTransfers.append(transfer) }
                inFlight -= 1
            }
            if inFlight > 0 { curl_multi_poll(multi, nil, 0, 100, nil) }
        }
        return answers.map {
            $0 ?? Answer(status: 0, body: [], headers: [:], transportError: "lost", latencySeconds: 0)
        }
    }

    private static func answer(_ transfer: CurlTransfer, code: CURLcode) -> Answer {
        let latency = Double(DispatchTime.now().uptimeNanoseconds - transfer.started.uptimeNanoseconds) / 1e9
        guard code == CURLE_OK, transfer.status > 0 else {
            return Answer(
                status: 0, body: [], headers: [:], transportError: String(cString: curl_easy_strerror(code)),
                latencySeconds: latency)
        }
        return Answer(
            status: transfer.status, body: transfer.responseBody, headers: transfer.keptHeaderValues,
            transportError: nil, latencySeconds: latency)
    }
}
