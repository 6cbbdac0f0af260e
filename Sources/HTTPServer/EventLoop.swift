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

/// One connection: its socket, its queued output, and its state machine. Owned by its loop's thread.
private final class Connection {
    let fd: Int32
    let generation: UInt64
    var machine: ConnectionStateMachine
    var output: [UInt8] = []
    var outputOffset = 0
    var readingStopped = false
    var watchingWrites = false
    /// The client's IPv4 address, network byte order.
    var peer: UInt32 = 0

    init(fd: Int32, generation: UInt64, machine: ConnectionStateMachine) {
        self.fd = fd
        self.generation = generation
        self.machine = machine
    }

    var hasPendingOutput: Bool { outputOffset < output.count }
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
    private let connectionTable: ConnectionTable
    /// While accepting is paused (descriptors ran out): when to watch the listener again.
    private var acceptResumesAt: UInt64?
    private var recorder: RequestRecorder
    private let handlerPool: HandlerPool
    private var connections: [Int32: Connection] = [:]
    private var nextGeneration: UInt64 = 0
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var dateSecond = -1
    private var dateBytes: [UInt8] = []
    private var stopDeadline: UInt64?
    private let timeouts: ConnectionStateMachine.Timeouts
    /// The actions of the event being handled; one buffer reused for every event.
    private var actions: [ConnectionAction] = []

    init(
        listenerFD: Int32, mailbox: LoopMailbox, router: Router, configuration: HTTPServerConfiguration,
        connectionTable: ConnectionTable, statistics: LoopStatistics, handlerPool: HandlerPool,
        accessLog: AccessLogConfiguration?
    ) throws(SystemError) {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError(function: "epoll_create1", errno: errno) }
        epollFD = fd
        self.listenerFD = listenerFD
        self.mailbox = mailbox
        self.router = router
        self.configuration = configuration
        self.connectionTable = connectionTable
        self.recorder = RequestRecorder(router: router, statistics: statistics, accessLog: accessLog)
        self.timeouts = ConnectionStateMachine.Timeouts(
            request: UInt64(configuration.requestTimeout * 1e9), idle: UInt64(configuration.idleTimeout * 1e9),
            write: UInt64(configuration.writeTimeout * 1e9))
        actions.reserveCapacity(16)
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
            if let resumesAt = acceptResumesAt, now >= resumesAt { resumeAccepting() }
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
        // Not reading: neither input nor the peer's half-close is wanted (level-triggered, either
        // would be reported again and again while a handler runs).
        let events =
            (connection.readingStopped ? 0 : EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            | (connection.watchingWrites ? EPOLLOUT.rawValue : 0)
        do {
            try Posix.epollControl(epollFD, EPOLL_CTL_MOD, connection.fd, events: events)
        } catch {
            close(connection)  // the kernel is out of memory for its watch: give this connection up
        }
    }

    private func acceptAll(now: UInt64) {
        guard let listenerFD, acceptResumesAt == nil else { return }
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: UInt32)?
            do {
                accepted = try Posix.accept(listenerFD)
            } catch {
                switch error.errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    pauseAccepting(now: now)
                    return
                default:
                    continue  // ECONNABORTED and friends: that client is gone, the next may be fine
                }
            }
            guard let (fd, peer) = accepted else { return }
            guard connectionTable.admit(peer) == nil else {
                Posix.close(fd)
                continue
            }
            guard Posix.setNoDelay(fd),
                (try? Posix.epollControl(
                    epollFD, EPOLL_CTL_ADD, fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)) != nil
            else {
                connectionTable.release(peer)
                Posix.close(fd)
                continue
            }
            nextGeneration += 1
            let connection = Connection(
                fd: fd, generation: nextGeneration,
                machine: ConnectionStateMachine(limits: configuration.limits, timeouts: timeouts, now: now))
            connection.peer = peer
            connections[fd] = connection
        }
    }

    /// Stops watching the listener for a moment: the process is out of descriptors (or memory), and
    /// a level-triggered listener would report the waiting clients again at once, spinning the loop.
    /// Pending clients wait in the backlog meanwhile; closed connections free descriptors.
    private func pauseAccepting(now: UInt64) {
        guard let listenerFD else { return }
        connectionTable.acceptPaused()
        try? Posix.epollControl(epollFD, EPOLL_CTL_DEL, listenerFD, events: 0)
        acceptResumesAt = now + Self.acceptPause
    }

    private func resumeAccepting() {
        acceptResumesAt = nil
        guard let listenerFD else { return }
        do {
            try Posix.epollControl(epollFD, EPOLL_CTL_ADD, listenerFD, events: EPOLLIN.rawValue)
        } catch {
            acceptResumesAt = Posix.monotonicNanoseconds() + Self.acceptPause  // no memory for the watch yet
        }
    }

    /// How long accepting pauses after running out of descriptors.
    private static let acceptPause: UInt64 = 100_000_000

    private func handle(_ connection: Connection, flags: UInt32, now: UInt64) {
        if connection.readingStopped, flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            close(connection)  // reset or gone both ways: no answer can reach it
            return
        }
        if flags & EPOLLOUT.rawValue != 0 {
            flush(connection, now: now)
            perform(on: connection, now: now)
        }
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
                connection.machine.peerClosed(now: now, into: &actions)
                perform(on: connection, now: now)
                return
            }
            readBuffer.withUnsafeBytes {
                connection.machine.received(UnsafeRawBufferPointer(rebasing: $0[0..<count]), now: now, into: &actions)
            }
            perform(on: connection, now: now)
            guard connections[connection.fd] === connection, !connection.readingStopped else { return }
            total += count
            // A short read means the socket is drained; epoll is level-triggered, so reading again
            // only to hear EAGAIN would cost a system call per request.
            if count < readBuffer.count { break }
        }
    }

    /// Carries out what the connection's state machine decided, including what handlers answered
    /// inline add to the list. `actions` is the loop's one reused buffer.
    private func perform(on connection: Connection, now: UInt64) {
        var index = 0
        while index < actions.count {
            let action = actions[index]
            index += 1
            switch action {
            case .handle(let request):
                dispatch(request, on: connection, now: now)
            case .respond(let response, let keepAlive, let includeBody):
                respond(connection, response, keepAlive: keepAlive, includeBody: includeBody)
            case .sendContinue:
                connection.output.append(contentsOf: Self.continueResponse)
            case .flush:
                flush(connection, now: now)
            case .stopReading:
                if !connection.readingStopped {
                    connection.readingStopped = true
                    modify(connection)
                }
            case .lingeringClose, .close:
                if case .lingeringClose = action, connections[connection.fd] === connection {
                    Posix.shutdownWriteAndDrain(connection.fd)
                }
                close(connection)
                index = actions.count  // nothing follows a close
            }
        }
        actions.removeAll(keepingCapacity: true)
    }

    private static let continueResponse = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Routes a request: answered inline, or handed to the handler pool with an id and the client's
    /// address; the pool's answer comes back through the mailbox.
    private func dispatch(_ request: HTTPRequest, on connection: Connection, now: UInt64) {
        var request = request
        switch router.resolve(method: request.method, path: request.path) {
        case .notFound:
            connection.machine.handlerFinished(
                ResponseWriter.error(404, code: .notFound, message: "no such resource"), now: now, into: &actions)
        case .methodNotAllowed(let allow):
            connection.machine.handlerFinished(
                ResponseWriter.error(
                    405, code: .methodNotAllowed, message: "method not allowed on this resource",
                    extraHeaders: [("Allow", allow.joined(separator: ", "))]), now: now, into: &actions)
        case .found(let handler, let parameters, let execution, let route):
            connection.machine.inFlight?.route = route
            request.pathParameters = parameters
            switch execution {
            case .inline:
                connection.machine.handlerFinished(handler(request), now: now, into: &actions)
            case .pool, .deferred, .fromMemory, .deferredFromMemory:
                // Only pooled handlers get ids: they do the work (writes, pushes) worth tracing;
                // inline answers come from memory and stay as cheap as possible.
                request.requestID = recorder.requestID(
                    supplied: request.headers.first {
                        HTTPRequestParser.equalsIgnoringCase($0.name, "x-request-id")
                    }?.value)
                connection.machine.inFlight?.requestID = request.requestID
                request.clientAddress = configuration.trustedProxies.clientAddress(
                    peer: connection.peer, headers: request.headers)
                if case .fromMemory(let attempt) = execution, let response = attempt(request) {
                    connection.machine.handlerFinished(response, now: now, into: &actions)
                    return
                }
                let (mailbox, fd, generation, finalRequest) = (
                    self.mailbox, connection.fd, connection.generation, request
                )
                switch execution {
                case .deferred(let start), .deferredFromMemory(_, let start):
                    // The handler returns once its write is queued; the commit's completion answers.
                    // Each responder is made where it is used: one that goes unanswered answers 500
                    // when it is let go, which a pool thread's kept closure would put off.
                    let deliver: @Sendable (HTTPResponse) -> Void = { response in
                        mailbox.post(.init(fd: fd, generation: generation, response: response))
                    }
                    if case .deferredFromMemory(let attempt, _) = execution, let rest = attempt(finalRequest) {
                        rest(Responder(deliver))
                        return
                    }
                    handlerPool.submit { start(finalRequest, Responder(deliver)) }
                default:
                    handlerPool.submit {
                        mailbox.post(.init(fd: fd, generation: generation, response: handler(finalRequest)))
                    }
                }
            }
        }
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
            connection.machine.handlerFinished(completion.response, now: now, into: &actions)
            perform(on: connection, now: now)
        }
    }

    private func respond(_ connection: Connection, _ response: HTTPResponse, keepAlive: Bool, includeBody: Bool) {
        let second = Int(time(nil))
        if second != dateSecond {
            dateSecond = second
            dateBytes = ResponseWriter.httpDate(second)
        }
        let before = connection.output.count
        let current = connection.machine.inFlight
        ResponseWriter.append(
            response, to: &connection.output, date: dateBytes, keepAlive: keepAlive, includeBody: includeBody,
            requestID: current?.requestID)
        if let current {
            recorder.answered(
                current, status: response.status, bytes: connection.output.count - before,
                at: Posix.monotonicNanoseconds())
        }
        connection.machine.inFlight = nil
    }

    private func flush(_ connection: Connection, now: UInt64) {
        guard connections[connection.fd] === connection else { return }
        var progressed = false
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
                if progressed { connection.machine.wrote(drained: false, now: now, into: &actions) }
                if !connection.watchingWrites {
                    connection.watchingWrites = true
                    modify(connection)
                }
                return
            }
            connection.outputOffset += written
            progressed = true
        }
        connection.output.removeAll(keepingCapacity: connection.output.capacity <= 64 * 1024)
        connection.outputOffset = 0
        if connection.watchingWrites {
            connection.watchingWrites = false
            modify(connection)
        }
        connection.machine.wrote(drained: true, now: now, into: &actions)
    }

    private func close(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        // Closing the descriptor removes it from the epoll set; no `EPOLL_CTL_DEL` needed.
        Posix.close(connection.fd)
        connectionTable.release(connection.peer)
    }

    /// Lets every connection's machine check its timeouts (408, idle keep-alives, stalled writers).
    private func sweep(now: UInt64) {
        for connection in Array(connections.values) {
            connection.machine.tick(now: now, into: &actions)
            perform(on: connection, now: now)
        }
    }

    /// Stops accepting; idle connections close, busy ones finish their current request.
    private func beginStop(now: UInt64) {
        guard stopDeadline == nil else { return }
        stopDeadline = now + UInt64(configuration.shutdownDeadline * 1e9)
        if let listenerFD {
            Posix.close(listenerFD)
            self.listenerFD = nil
        }
        for connection in Array(connections.values) {
            connection.machine.stop(now: now, into: &actions)
            perform(on: connection, now: now)
        }
    }
}
