internal import CLinuxShim
internal import Dispatch
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// How other threads reach an event loop: finished responses and the stop request, plus the eventfd
/// that wakes its `epoll_wait`.
final class LoopMailbox: Sendable {
    struct Completion: Sendable {
        let fd: Int32
        let generation: UInt64
        let response: HTTPResponse
    }

    let wakeFD: Int32
    let completions = Mutex<[Completion]>([])
    let stopRequested = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)

    init() throws(SystemError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard fd >= 0 else { throw SystemError(function: "eventfd", errno: errno) }
        wakeFD = fd
    }

    deinit {
        Posix.close(wakeFD)
    }

    func post(_ completion: Completion) {
        completions.withLock { $0.append(completion) }
        wake()
    }

    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }
}

/// Open connections across every loop, for the connection cap.
final class ConnectionCounter: Sendable {
    let value = Atomic<Int>(0)
}

/// The request a connection is answering, for its access log entry.
private struct InFlight {
    let method: String
    let path: String
    let started: UInt64
    var requestID = "-"
    /// The router's index of the matched route; `-1` when none matched.
    var route = -1
}

/// One connection's state, owned by its loop's thread.
private final class Connection {
    let fd: Int32
    let generation: UInt64
    var parser: HTTPRequestParser
    var output: [UInt8] = []
    var outputOffset = 0
    var waitingForHandler = false
    var closeAfterWrite = false
    var readingStopped = false
    var watchingWrites = false
    var lastActivity: UInt64
    var requestStarted: UInt64?
    var writeProgress: UInt64
    var current: InFlight?
    /// The client's IPv4 address, network byte order.
    var peer: UInt32 = 0
    /// How to frame the response a pooled handler is computing.
    var pending: (keepAlive: Bool, includeBody: Bool) = (true, true)

    init(fd: Int32, generation: UInt64, limits: HTTPLimits, now: UInt64) {
        self.fd = fd
        self.generation = generation
        self.parser = HTTPRequestParser(limits: limits)
        self.lastActivity = now
        self.writeProgress = now
    }

    var hasPendingOutput: Bool { outputOffset < output.count }
    var isIdle: Bool { !waitingForHandler && !hasPendingOutput && !parser.isMidRequest }
}

/// An epoll loop on its own thread: accepts on its listener, reads, parses, dispatches, writes.
///
/// Level-triggered epoll: a descriptor stays reported while it has data, so a read that stops early
/// (to be fair to other connections) loses nothing, at the cost of one more `epoll_wait` round.
/// Everything here is touched only by the loop's thread; other threads talk to it through `LoopMailbox`.
final class EventLoop {
    private let epollFD: Int32
    private var listenerFD: Int32?
    private let mailbox: LoopMailbox
    private let router: Router
    private let configuration: HTTPServerConfiguration
    private let openConnections: ConnectionCounter
    private let accessLog: (@Sendable (AccessLogEntry) -> Void)?
    private let statistics: LoopStatistics
    private let handlerPool: HandlerPool
    private var connections: [Int32: Connection] = [:]
    private var nextGeneration: UInt64 = 0
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var dateSecond = -1
    private var dateBytes: [UInt8] = []
    private var stopDeadline: UInt64?
    /// Request ids are this loop's random prefix and a counter: unique per process run, cheap to make.
    private let requestIDPrefix = String(UInt32.random(in: .min ... .max), radix: 16)
    private var requestCounter: UInt64 = 0

    init(
        listenerFD: Int32, mailbox: LoopMailbox, router: Router, configuration: HTTPServerConfiguration,
        openConnections: ConnectionCounter, statistics: LoopStatistics, handlerPool: HandlerPool,
        accessLog: (@Sendable (AccessLogEntry) -> Void)?
    ) throws(SystemError) {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError(function: "epoll_create1", errno: errno) }
        epollFD = fd
        self.listenerFD = listenerFD
        self.mailbox = mailbox
        self.router = router
        self.configuration = configuration
        self.openConnections = openConnections
        self.accessLog = accessLog
        self.statistics = statistics
        self.handlerPool = handlerPool
        watch(listenerFD, events: EPOLLIN.rawValue)
        watch(mailbox.wakeFD, events: EPOLLIN.rawValue)
    }

    deinit {
        Posix.close(epollFD)
    }

    /// Runs until a requested stop has drained every connection (or its deadline passed).
    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastSweep = Posix.monotonicNanoseconds()
        while true {
            let count = epoll_wait(epollFD, &events, Int32(events.count), 250)
            let now = Posix.monotonicNanoseconds()
            if count > 0 {
                for index in 0..<Int(count) {
                    let fd = events[index].data.fd
                    let flags = events[index].events
                    if fd == listenerFD {
                        acceptAll(now: now)
                    } else if fd == mailbox.wakeFD {
                        var value: UInt64 = 0
                        _ = Glibc.read(fd, &value, 8)
                        deliverCompletions(now: now)
                    } else if let connection = connections[fd] {
                        handle(connection, flags: flags, now: now)
                    }
                }
            }
            if mailbox.stopRequested.load(ordering: .acquiring) { beginStop(now: now) }
            if now - lastSweep > 250_000_000 {
                sweep(now: now)
                lastSweep = now
            }
            if let stopDeadline, connections.isEmpty || now > stopDeadline {
                for connection in Array(connections.values) { close(connection) }
                return
            }
        }
    }

    private func watch(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
    }

    private func modify(_ connection: Connection) {
        var event = epoll_event()
        event.events =
            (connection.readingStopped ? 0 : EPOLLIN.rawValue) | (connection.watchingWrites ? EPOLLOUT.rawValue : 0)
            | EPOLLRDHUP.rawValue
        event.data.fd = connection.fd
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, connection.fd, &event)
    }

    private func acceptAll(now: UInt64) {
        guard let listenerFD else { return }
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: UInt32)?
            do {
                accepted = try Posix.accept(listenerFD)
            } catch {
                return  // EMFILE, ECONNABORTED and friends: try again on the next readiness
            }
            guard let (fd, peer) = accepted else { return }
            guard openConnections.value.wrappingAdd(1, ordering: .relaxed).oldValue < configuration.maxConnections
            else {
                openConnections.value.wrappingSubtract(1, ordering: .relaxed)
                Posix.close(fd)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            nextGeneration += 1
            let connection = Connection(fd: fd, generation: nextGeneration, limits: configuration.limits, now: now)
            connection.peer = peer
            connections[fd] = connection
            watch(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        }
    }

    private func handle(_ connection: Connection, flags: UInt32, now: UInt64) {
        if flags & EPOLLOUT.rawValue != 0 { flush(connection, now: now) }
        guard connections[connection.fd] === connection else { return }
        if flags & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0,
            !connection.readingStopped
        {
            readAvailable(connection, now: now)
        }
    }

    private func readAvailable(_ connection: Connection, now: UInt64) {
        var total = 0
        while total < 256 * 1024 {
            let result: Int?
            do {
                result = try readBuffer.withUnsafeMutableBytes { buffer throws(SystemError) in
                    try Posix.read(connection.fd, buffer)
                }
            } catch {
                close(connection)  // ECONNRESET and friends
                return
            }
            guard let count = result else { break }
            if count == 0 {
                // The peer closed its side: finish what is queued only if it still reads; a client
                // that leaves mid-request gets nothing more.
                if connection.isIdle || connection.parser.isMidRequest {
                    close(connection)
                } else {
                    connection.readingStopped = true
                    connection.closeAfterWrite = true
                    modify(connection)
                }
                return
            }
            if connection.requestStarted == nil { connection.requestStarted = now }
            connection.lastActivity = now
            readBuffer.withUnsafeBytes { connection.parser.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            total += count
            // A short read means the socket is drained; epoll is level-triggered, so reading again
            // only to hear EAGAIN would cost a system call per request.
            if count < readBuffer.count { break }
        }
        process(connection, now: now)
    }

    /// The client's `X-Request-Id` when it is a short token, else a new id.
    private func nextRequestID(supplied: String?) -> String {
        // `request.header(_:)` lowercases its argument on every call; this runs on every request.
        if let supplied, (1...64).contains(supplied.utf8.count),
            supplied.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        {
            return supplied
        }
        requestCounter &+= 1
        return requestIDPrefix + "-" + String(requestCounter, radix: 16)
    }

    /// Answers buffered requests in order, one at a time, until one waits for its handler or data runs out.
    private func process(_ connection: Connection, now: UInt64) {
        while !connection.waitingForHandler && !connection.closeAfterWrite {
            let event: HTTPParseEvent
            do {
                event = try connection.parser.next()
            } catch {
                connection.current = InFlight(method: "-", path: "-", started: connection.requestStarted ?? now)
                respond(
                    connection,
                    ResponseWriter.error(
                        error.status, code: ResponseWriter.errorCode(for: error.status), message: error.reason),
                    keepAlive: false, includeBody: true, now: now
                )
                connection.readingStopped = true
                break
            }
            switch event {
            case .needMore:
                if !connection.parser.isMidRequest { connection.requestStarted = nil }
                flush(connection, now: now)
                return
            case .expectsContinue:
                connection.output.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
            case .request(var request):
                connection.current = InFlight(
                    method: request.method, path: request.path, started: connection.requestStarted ?? now)
                connection.requestStarted = connection.parser.isMidRequest ? now : nil
                let keepAlive = request.keepAlive && mailbox.stopRequested.load(ordering: .relaxed) == false
                let includeBody = request.method != "HEAD"
                switch router.resolve(method: request.method, path: request.path) {
                case .notFound:
                    respond(
                        connection, ResponseWriter.error(404, code: "not_found", message: "no such resource"),
                        keepAlive: keepAlive, includeBody: includeBody, now: now
                    )
                case .methodNotAllowed(let allow):
                    respond(
                        connection,
                        ResponseWriter.error(
                            405, code: "method_not_allowed", message: "method not allowed on this resource",
                            extraHeaders: [("Allow", allow.joined(separator: ", "))]
                        ), keepAlive: keepAlive, includeBody: includeBody, now: now
                    )
                case .found(let handler, let parameters, let execution, let route):
                    connection.current?.route = route
                    request.pathParameters = parameters
                    request.keepAlive = keepAlive
                    switch execution {
                    case .inline:
                        respond(connection, handler(request), keepAlive: keepAlive, includeBody: includeBody, now: now)
                    case .pool:
                        // Only pooled handlers get ids: they do the work (writes, pushes) worth tracing;
                        // inline answers come from memory and stay as cheap as possible.
                        request.requestID = nextRequestID(
                            supplied: request.headers.first {
                                HTTPRequestParser.equalsIgnoringCase($0.name, "x-request-id")
                            }?.value)
                        connection.current?.requestID = request.requestID
                        request.clientAddress = Posix.ipv4Text(connection.peer)
                        connection.waitingForHandler = true
                        connection.pending = (keepAlive, includeBody)
                        let mailbox = self.mailbox
                        let fd = connection.fd
                        let generation = connection.generation
                        let finalRequest = request
                        handlerPool.submit {
                            mailbox.post(.init(fd: fd, generation: generation, response: handler(finalRequest)))
                        }
                    }
                }
            }
        }
        flush(connection, now: now)
    }

    private func deliverCompletions(now: UInt64) {
        let completions = mailbox.completions.withLock { pending in
            let taken = pending
            pending.removeAll(keepingCapacity: true)
            return taken
        }
        for completion in completions {
            guard let connection = connections[completion.fd], connection.generation == completion.generation else {
                continue  // the client left while its handler ran
            }
            connection.waitingForHandler = false
            let keepAlive =
                connection.pending.keepAlive && !connection.closeAfterWrite
                && !mailbox.stopRequested.load(ordering: .relaxed)
            respond(
                connection, completion.response, keepAlive: keepAlive, includeBody: connection.pending.includeBody,
                now: now)
            if connections[connection.fd] === connection { process(connection, now: now) }
        }
    }

    private func respond(
        _ connection: Connection, _ response: HTTPResponse, keepAlive: Bool, includeBody: Bool, now: UInt64
    ) {
        let second = Int(time(nil))
        if second != dateSecond {
            dateSecond = second
            dateBytes = ResponseWriter.httpDate(second)
        }
        let before = connection.output.count
        ResponseWriter.append(
            response, to: &connection.output, date: dateBytes, keepAlive: keepAlive, includeBody: includeBody,
            requestID: connection.current?.requestID)
        if !keepAlive { connection.closeAfterWrite = true }
        if let current = connection.current {
            let seconds = Double(Posix.monotonicNanoseconds() - current.started) / 1e9
            statistics.record(
                method: LoopStatistics.methodIndex(current.method), route: current.route, status: response.status,
                seconds: seconds)
            if let accessLog {
                accessLog(
                    AccessLogEntry(
                        method: current.method, path: current.path,
                        route: current.route >= 0 ? router.pattern(ofRoute: current.route) : nil,
                        requestID: current.requestID, status: response.status, bytes: connection.output.count - before,
                        durationSeconds: seconds
                    )
                )
            }
        }
        connection.current = nil
        connection.lastActivity = now
    }

    private func flush(_ connection: Connection, now: UInt64) {
        while connection.hasPendingOutput {
            let written: Int?
            do {
                written = try connection.output.withUnsafeBytes { buffer throws(SystemError) in
                    try Posix.write(connection.fd, UnsafeRawBufferPointer(rebasing: buffer[connection.outputOffset...]))
                }
            } catch {
                close(connection)
                return
            }
            guard let written else {
                if !connection.watchingWrites {
                    connection.watchingWrites = true
                    modify(connection)
                }
                return
            }
            connection.outputOffset += written
            connection.writeProgress = now
        }
        connection.output.removeAll(keepingCapacity: connection.output.capacity <= 64 * 1024)
        connection.outputOffset = 0
        if connection.watchingWrites {
            connection.watchingWrites = false
            modify(connection)
        }
        if connection.closeAfterWrite && !connection.waitingForHandler {
            lingeringClose(connection)
        }
    }

    /// Half-closes and stops, so that a client still sending does not get a reset that destroys the
    /// response it has not read yet.
    private func lingeringClose(_ connection: Connection) {
        shutdown(connection.fd, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 where recv(connection.fd, &scratch, scratch.count, Int32(MSG_DONTWAIT)) > 0 {}
        close(connection)
    }

    private func close(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, connection.fd, nil)
        Posix.close(connection.fd)
        openConnections.value.wrappingSubtract(1, ordering: .relaxed)
    }

    /// Closes what has been silent too long: slow requests (408), idle keep-alives, stalled writers.
    private func sweep(now: UInt64) {
        let request = UInt64(configuration.requestTimeout * 1e9)
        let idle = UInt64(configuration.idleTimeout * 1e9)
        let write = UInt64(configuration.writeTimeout * 1e9)
        for connection in Array(connections.values) {
            if connection.hasPendingOutput {
                if now - connection.writeProgress > write { close(connection) }
            } else if let started = connection.requestStarted, connection.parser.isMidRequest,
                !connection.waitingForHandler
            {
                if now - started > request {
                    connection.current = InFlight(method: "-", path: "-", started: started)
                    respond(
                        connection,
                        ResponseWriter.error(408, code: "request_timeout", message: "request not completed in time"),
                        keepAlive: false, includeBody: true, now: now
                    )
                    connection.readingStopped = true
                    flush(connection, now: now)
                }
            } else if connection.isIdle, now - connection.lastActivity > idle {
                close(connection)
            }
        }
    }

    /// Stops accepting, closes idle connections, and lets busy ones finish their current request.
    private func beginStop(now: UInt64) {
        guard stopDeadline == nil else { return }
        stopDeadline = now + UInt64(configuration.shutdownDeadline * 1e9)
        if let listenerFD {
            _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, listenerFD, nil)
            Posix.close(listenerFD)
            self.listenerFD = nil
        }
        for connection in Array(connections.values) where connection.isIdle {
            close(connection)
        }
    }
}
