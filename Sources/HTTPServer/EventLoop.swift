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

    func wake() { Posix.addToEventCounter(wakeFD) }
}

/// Open connections across every loop, for the connection cap.
final class ConnectionCounter: Sendable {
    let value = Atomic<Int>(0)
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
    private var recorder: RequestRecorder
    private let handlerPool: HandlerPool
    private var connections: [Int32: Connection] = [:]
    private var nextGeneration: UInt64 = 0
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var dateSecond = -1
    private var dateBytes: [UInt8] = []
    private var stopDeadline: UInt64?

    init(
        listenerFD: Int32, mailbox: LoopMailbox, router: Router, configuration: HTTPServerConfiguration,
        openConnections: ConnectionCounter, statistics: LoopStatistics, handlerPool: HandlerPool,
        accessLog: AccessLogConfiguration?
    ) throws(SystemError) {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError(function: "epoll_create1", errno: errno) }
        epollFD = fd
        self.listenerFD = listenerFD
        self.mailbox = mailbox
        self.router = router
        self.configuration = configuration
        self.openConnections = openConnections
        self.recorder = RequestRecorder(router: router, statistics: statistics, accessLog: accessLog)
        self.handlerPool = handlerPool
        do {
            try Posix.epollControl(fd, EPOLL_CTL_ADD, listenerFD, events: EPOLLIN.rawValue)
            try Posix.epollControl(fd, EPOLL_CTL_ADD, mailbox.wakeFD, events: EPOLLIN.rawValue)
        } catch {
            Posix.close(fd)
            throw error
        }
    }

    deinit {
        Posix.close(epollFD)
    }

    /// Runs until a requested stop has drained every connection (or its deadline passed).
    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastSweep = Posix.monotonicNanoseconds()
        while true {
            let count = Posix.epollWait(epollFD, &events, timeoutMilliseconds: 250)
            let now = Posix.monotonicNanoseconds()
            if count > 0 {
                for index in 0..<count {
                    let fd = events[index].data.fd
                    let flags = events[index].events
                    if fd == listenerFD {
                        acceptAll(now: now)
                    } else if fd == mailbox.wakeFD {
                        _ = Posix.readEventCounter(fd)
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
            recorder.endOfIteration()
            if let stopDeadline, connections.isEmpty || now > stopDeadline {
                for connection in Array(connections.values) { close(connection) }
                recorder.finish()
                return
            }
        }
    }

    private func modify(_ connection: Connection) {
        let events =
            (connection.readingStopped ? 0 : EPOLLIN.rawValue) | (connection.watchingWrites ? EPOLLOUT.rawValue : 0)
            | EPOLLRDHUP.rawValue
        do {
            try Posix.epollControl(epollFD, EPOLL_CTL_MOD, connection.fd, events: events)
        } catch {
            close(connection)  // the kernel is out of memory for its watch: give this connection up
        }
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
            guard Posix.setNoDelay(fd),
                (try? Posix.epollControl(
                    epollFD, EPOLL_CTL_ADD, fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)) != nil
            else {
                openConnections.value.wrappingSubtract(1, ordering: .relaxed)
                Posix.close(fd)
                continue
            }
            nextGeneration += 1
            let connection = Connection(fd: fd, generation: nextGeneration, limits: configuration.limits, now: now)
            connection.peer = peer
            connections[fd] = connection
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
                        request.requestID = recorder.requestID(
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
            recorder.answered(
                current, status: response.status, bytes: connection.output.count - before,
                at: Posix.monotonicNanoseconds())
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
        Posix.shutdownWriteAndDrain(connection.fd)
        close(connection)
    }

    private func close(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        // Closing the descriptor removes it from the epoll set; no `EPOLL_CTL_DEL` needed.
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
            Posix.close(listenerFD)
            self.listenerFD = nil
        }
        for connection in Array(connections.values) where connection.isIdle {
            close(connection)
        }
    }
}
