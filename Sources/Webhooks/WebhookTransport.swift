internal import CCurl
internal import Dispatch
internal import FoundationEssentials
internal import Telemetry

#if canImport(Glibc)
    import Glibc
#endif

/// What came of one POST: the receiver's status and `Retry-After`, or why no answer came.
struct WebhookAnswer: Sendable, Hashable {
    var status: Int?
    var retryAfterSeconds: Int?
    var error: String?
    var durationMilliseconds: Int
}

/// Many webhook POSTs at once on one libcurl multi handle (HTTP/1.1 or HTTP/2, whatever the receiver
/// speaks), each with its own deadline, so that a receiver that hangs holds one transfer, never the
/// others. Every connection's address passes the `WebhookURLPolicy` before its socket is opened;
/// redirects are not followed and no proxy from the environment is used.
///
/// - Important: Not `Sendable`: the dispatcher's thread owns it. Only `wake` may be called from
///   another thread (`curl_multi_wakeup` is made for that).
final class WebhookTransport {
    private let multi: UnsafeMutableRawPointer
    private let policy: WebhookURLPolicy
    private let timeoutMilliseconds: Int
    private let caFile: String?
    private var running: [UnsafeMutableRawPointer: WebhookTransfer] = [:]
    /// Finished transfers kept for the next POSTs: a reused easy handle keeps its options and
    /// buffers, where a new one was allocated, set up and freed for every attempt.
    private var idle: [WebhookTransfer] = []
    private let idleLimit: Int

    /// - Parameter idleLimit: finished transfers kept for reuse: the most in flight at once, since
    ///   more would never be used.
    init(policy: WebhookURLPolicy, timeoutMilliseconds: Int, caFile: String?, idleLimit: Int)
        throws(WebhookError)
    {
        guard let multi = curl_multi_init() else { throw WebhookError("curl_multi_init failed") }
        self.multi = multi
        self.policy = policy
        self.timeoutMilliseconds = timeoutMilliseconds
        self.caFile = caFile
        self.idleLimit = idleLimit
        // As many connections per receiver as attempts may be in flight to one endpoint (the
        // dispatcher's cap), kept between deliveries.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 32)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 256)
    }

    deinit {
        for (handle, _) in running { curl_multi_remove_handle(multi, handle) }
        running.removeAll()
        idle.removeAll()
        curl_multi_cleanup(multi)
    }

    var inFlight: Int { running.count }

    /// Starts a POST; its answer comes out of a later `poll` under `tag`.
    func start(tag: Int64, url: String, headers: [String], body: [UInt8]) throws(WebhookError) {
        let transfer: WebhookTransfer
        if let kept = idle.popLast() {
            transfer = kept
        } else {
            transfer = try WebhookTransfer(policy: policy, timeoutMilliseconds: timeoutMilliseconds, caFile: caFile)
        }
        // A transfer that failed to take its request is not reused: its handle may hold half of it.
        try transfer.prepare(tag: tag, url: url, headers: headers, body: body)
        guard curl_multi_add_handle(multi, transfer.handle) == CURLM_OK else {
            throw WebhookError("curl_multi_add_handle failed")
        }
        running[transfer.handle] = transfer
    }

    /// Moves the transfers on, waits up to `waitMilliseconds` for something to happen (or `wake`),
    /// and returns the answers of those that finished.
    func poll(waitMilliseconds: Int) -> [(tag: Int64, answer: WebhookAnswer)] {
        var stillRunning: Int32 = 0
        curl_multi_perform(multi, &stillRunning)
        var finished = collect()
        if finished.isEmpty {
            curl_multi_poll(multi, nil, 0, Int32(waitMilliseconds), nil)
            curl_multi_perform(multi, &stillRunning)
            finished = collect()
        }
        return finished
    }

    /// Transfers kept for reuse (for tests).
    var idleCount: Int { idle.count }

    /// Ends a `poll` early: a stop, or new deliveries due.
    func wake() { curl_multi_wakeup(multi) }

    private func collect() -> [(tag: Int64, answer: WebhookAnswer)] {
        var answers: [(tag: Int64, answer: WebhookAnswer)] = []
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                let transfer = running.removeValue(forKey: handle)
            else { continue }
            let code = message.pointee.data.result
            curl_multi_remove_handle(multi, handle)
            answers.append((transfer.tag, transfer.answer(code)))
            if idle.count < idleLimit { idle.append(transfer) }
        }
        return answers
    }
}

/// One easy handle and what its current POST needs: the options every POST shares are set once,
/// the request's own (URL, headers, body) by `prepare` for each POST it carries.
private final class WebhookTransfer {
    let handle: UnsafeMutableRawPointer
    let policy: WebhookURLPolicy
    private(set) var tag: Int64 = 0
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var started = DispatchTime.now()
    /// Why the socket callback refused the address, when it did.
    fileprivate var refusal: String?
    fileprivate var retryAfterSeconds: Int?

    init(policy: WebhookURLPolicy, timeoutMilliseconds: Int, caFile: String?) throws(WebhookError) {
        guard let handle = curl_easy_init() else { throw WebhookError("curl_easy_init failed") }
        self.handle = handle
        self.policy = policy
        let me = Unmanaged.passUnretained(self).toOpaque()
        var codes: [CURLcode] = [
            ccurl_easy_setopt_pointer(handle, CURLOPT_PROTOCOLS_STR, policy.allowsHTTP ? "http,https" : "https"),
            ccurl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0),
            // An operator's HTTP_PROXY must not carry merchants' URLs past the address check.
            ccurl_easy_setopt_pointer(handle, CURLOPT_PROXY, ""),
            ccurl_easy_setopt_long(handle, CURLOPT_POST, 1),
            ccurl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds),
            ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            ccurl_easy_setopt_write_function(handle, Self.onBody),
            ccurl_easy_setopt_header_function(handle, Self.onHeader),
            ccurl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, me),
            ccurl_easy_setopt_opensocket_function(handle, Self.onOpenSocket),
            ccurl_easy_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, me),
        ]
        if let caFile { codes.append(ccurl_easy_setopt_pointer(handle, CURLOPT_CAINFO, caFile)) }
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            curl_easy_cleanup(handle)
            throw WebhookError("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
    }

    /// Sets the next POST's URL, headers and body, and forgets what the last one left.
    func prepare(tag: Int64, url: String, headers: [String], body: [UInt8]) throws(WebhookError) {
        self.tag = tag
        refusal = nil
        retryAfterSeconds = nil
        started = DispatchTime.now()
        // The last POST's list is no longer read: its transfer is finished.
        curl_slist_free_all(headerList)
        headerList = nil
        for header in ["Content-Type: application/json", "User-Agent: deliveryd-webhooks", "Expect:"] + headers {
            headerList = curl_slist_append(headerList, header)
        }
        let codes: [CURLcode] = [
            ccurl_easy_setopt_pointer(handle, CURLOPT_URL, url),
            // The size first: COPYPOSTFIELDS copies that many bytes.
            ccurl_easy_setopt_long(handle, CURLOPT_POSTFIELDSIZE, body.count),
            ccurl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, body),
            ccurl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList),
        ]
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            throw WebhookError("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
    }

    func answer(_ code: CURLcode) -> WebhookAnswer {
        let elapsed = Int((DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000)
        guard code == CURLE_OK else {
            let error = refusal ?? String(cString: curl_easy_strerror(code))
            return WebhookAnswer(status: nil, retryAfterSeconds: nil, error: error, durationMilliseconds: elapsed)
        }
        var status = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return WebhookAnswer(
            status: status, retryAfterSeconds: retryAfterSeconds,
            error: (200..<300).contains(status) ? nil : "HTTP \(status)", durationMilliseconds: elapsed)
    }

    /// The receiver's body is not kept: only its status counts.
    private static let onBody: curl_write_callback = { _, size, count, _ in size * count }

    private static let onHeader: curl_write_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        let transfer = Unmanaged<WebhookTransfer>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        let line = data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
        if line.lowercased().hasPrefix("retry-after:") {
            transfer.retryAfterSeconds = RetryAfter.seconds(
                line.dropFirst("retry-after:".count).prefix { !$0.isNewline }, now: Date())
        }
        return length
    }

    /// Opens a connection's socket only if its address passes the policy.
    private static let onOpenSocket: curl_opensocket_callback = { context, _, address in
        guard let context, let address else { return CURL_SOCKET_BAD }
        let transfer = Unmanaged<WebhookTransfer>.fromOpaque(context).takeUnretainedValue()
        let family = address.pointee.family
        let raw = UnsafeRawPointer(address).advanced(by: MemoryLayout<curl_sockaddr>.offset(of: \.addr) ?? 16)
        let bytes: [UInt8]
        switch family {
        case AF_INET:
            let inet = raw.loadUnaligned(as: sockaddr_in.self)
            bytes = withUnsafeBytes(of: inet.sin_addr) { Array($0) }
        case AF_INET6:
            let inet6 = raw.loadUnaligned(as: sockaddr_in6.self)
            bytes = withUnsafeBytes(of: inet6.sin6_addr) { Array($0) }
        default:
            transfer.refusal = "address family \(family) is not allowed"
            return CURL_SOCKET_BAD
        }
        if let refusal = transfer.policy.refusal(ofAddress: bytes) {
            transfer.refusal = "refused: " + refusal
            return CURL_SOCKET_BAD
        }
        return socket(family, address.pointee.socktype, address.pointee.protocol)
    }
}

/// A failure of the webhook machinery itself (libcurl refused a handle or an option).
public struct WebhookError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
