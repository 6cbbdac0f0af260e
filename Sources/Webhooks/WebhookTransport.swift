internal import CCurl
internal import CLinuxShim
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

/// Many webhook POSTs at once on one libcurl multi handle, in HTTP/1.1, each with its own deadline,
/// so that a receiver that hangs holds one transfer, never the others. Every connection's address
/// passes the `WebhookURLPolicy` before its socket is opened; redirects are not followed and no
/// proxy from the environment is used.
///
/// Driven by `curl_multi_socket_action` over an epoll set of its own: libcurl names the sockets to
/// watch and the next timeout, and each wake-up hands it only the sockets that are ready, where
/// `curl_multi_perform` walked every transfer and polled each one's socket on every call. At 32
/// attempts in flight to one endpoint the two cost the same (docs/performance.md); the walk grows
/// with the attempts in flight over every endpoint.
///
/// - Important: Not `Sendable`: the dispatcher's thread owns it, and libcurl calls its callbacks
///   on that thread, from inside the transport's own calls.
final class WebhookTransport {
    private let multi: UnsafeMutableRawPointer
    private let epollFD: Int32
    private let policy: WebhookURLPolicy
    private let timeoutMilliseconds: Int
    private let caFile: String?
    private var running: [UnsafeMutableRawPointer: WebhookTransfer] = [:]
    /// Finished transfers kept for the next POSTs: a reused easy handle keeps its options and
    /// buffers, where a new one was allocated, set up and freed for every attempt.
    private var idle: [WebhookTransfer] = []
    private let idleLimit: Int
    /// When libcurl asked to be called back (`CLOCK_MONOTONIC` nanoseconds); `nil` when it did not.
    private var timerDeadline: UInt64?
    private var readyEvents = [epoll_event](repeating: epoll_event(), count: 64)

    /// - Parameter idleLimit: finished transfers kept for reuse: the most in flight at once, since
    ///   more would never be used.
    init(policy: WebhookURLPolicy, timeoutMilliseconds: Int, caFile: String?, idleLimit: Int)
        throws(WebhookError)
    {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw WebhookError("epoll_create1 failed (errno \(errno))") }
        guard let multi = curl_multi_init() else {
            close(epollFD)
            throw WebhookError("curl_multi_init failed")
        }
        self.multi = multi
        self.epollFD = epollFD
        self.policy = policy
        self.timeoutMilliseconds = timeoutMilliseconds
        self.caFile = caFile
        self.idleLimit = idleLimit
        // As many connections per receiver as attempts may be in flight to one endpoint (the
        // dispatcher's cap), kept between deliveries.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 32)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 256)
        // Unretained: the multi handle, and so its callbacks, end in this object's deinit.
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_multi_setopt_socket_function(multi, Self.onSocket)
        _ = ccurl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        _ = ccurl_multi_setopt_timer_function(multi, Self.onTimer)
        _ = ccurl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
    }

    deinit {
        // libcurl calls back while handles are removed and the multi handle cleaned up: not into an
        // object that is going away.
        _ = ccurl_multi_setopt_socket_function(multi, nil)
        _ = ccurl_multi_setopt_timer_function(multi, nil)
        for (handle, _) in running { curl_multi_remove_handle(multi, handle) }
        running.removeAll()
        idle.removeAll()
        curl_multi_cleanup(multi)
        close(epollFD)
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
        // Adding sets a timer of 0: the next `poll` starts the transfer.
        guard curl_multi_add_handle(multi, transfer.handle) == CURLM_OK else {
            throw WebhookError("curl_multi_add_handle failed")
        }
        running[transfer.handle] = transfer
    }

    /// Moves the transfers on, waits up to `waitMilliseconds` for one of their sockets or libcurl's
    /// timer, and returns the answers of those that finished.
    func poll(waitMilliseconds: Int) -> [(tag: Int64, answer: WebhookAnswer)] {
        runTimerIfDue()
        let finished = collect()
        if !finished.isEmpty { return finished }
        var wait = waitMilliseconds
        if let deadline = timerDeadline {
            let now = Self.monotonicNanoseconds()
            wait = min(wait, deadline > now ? Int((deadline - now + 999_999) / 1_000_000) : 0)
        }
        let count = epoll_wait(epollFD, &readyEvents, Int32(readyEvents.count), Int32(clamping: wait))
        var stillRunning: Int32 = 0
        for index in 0..<max(0, Int(count)) {
            let flags = readyEvents[index].events
            var mask: Int32 = 0
            if flags & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { mask |= CURL_CSELECT_IN }
            if flags & EPOLLOUT.rawValue != 0 { mask |= CURL_CSELECT_OUT }
            if flags & EPOLLERR.rawValue != 0 { mask |= CURL_CSELECT_ERR }
            curl_multi_socket_action(multi, readyEvents[index].data.fd, mask, &stillRunning)
        }
        runTimerIfDue()
        return collect()
    }

    /// Transfers kept for reuse (for tests).
    var idleCount: Int { idle.count }

    private func runTimerIfDue() {
        guard let deadline = timerDeadline, deadline <= Self.monotonicNanoseconds() else { return }
        timerDeadline = nil
        var stillRunning: Int32 = 0
        curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &stillRunning)
    }

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

    /// libcurl says what to watch a socket for, or to stop watching it.
    private func watch(_ fd: Int32, for what: Int32) {
        if what == CURL_POLL_REMOVE {
            // The socket may be closed already, which has taken it out of the set.
            epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
            return
        }
        var event = epoll_event()
        event.events =
            (what & CURL_POLL_IN != 0 ? EPOLLIN.rawValue : 0) | (what & CURL_POLL_OUT != 0 ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        // A change for a watched socket is the common case; a new one (or one whose number was
        // closed and handed out again) is added.
        if epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) != 0, errno == ENOENT {
            epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
        }
    }

    private static let onSocket: curl_socket_callback = { _, fd, what, context, _ in
        guard let context else { return 0 }
        Unmanaged<WebhookTransport>.fromOpaque(context).takeUnretainedValue().watch(fd, for: what)
        return 0
    }

    /// libcurl asks to be called back in `milliseconds` (0: at once), or no more (-1).
    private static let onTimer: curl_multi_timer_callback = { _, milliseconds, context in
        guard let context else { return 0 }
        let transport = Unmanaged<WebhookTransport>.fromOpaque(context).takeUnretainedValue()
        transport.timerDeadline =
            milliseconds < 0 ? nil : monotonicNanoseconds() + UInt64(milliseconds) * 1_000_000
        return 0
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
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
            // HTTP/1.1 even where the receiver offers HTTP/2: this libcurl's HTTP/2 failed about one
            // attempt in eight to nginx under load ("Stream error in the HTTP/2 framing layer"), each
            // then waiting for its retry; every receiver speaks HTTP/1.1, over one connection per slot.
            ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)),
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
        // Every answer's header lines pass here; only `Retry-After` is read, so the others are
        // passed over without making a string of them.
        let name = "retry-after:".utf8
        let isRetryAfter = data.withMemoryRebound(to: UInt8.self, capacity: length) { line in
            length >= name.count
                && zip(name, UnsafeBufferPointer(start: line, count: name.count)).allSatisfy {
                    $0 == $1 || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) && $0 == $1 | 0x20
                }
        }
        if isRetryAfter {
            let value = data.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0 + name.count, count: length - name.count), as: UTF8.self)
            }
            transfer.retryAfterSeconds = RetryAfter.seconds(value.prefix { !$0.isNewline }, now: Date())
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
