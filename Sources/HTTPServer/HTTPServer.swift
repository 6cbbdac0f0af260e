internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// deliveryd's HTTP/1.1 server: epoll event loops on plain sockets, one per core, knowing nothing of
/// orders. Handlers come from a `Router`.
public final class HTTPServer: Sendable {
    public let configuration: HTTPServerConfiguration
    private let router: Router
    private let accessLog: AccessLogConfiguration?
    private let mailboxes: [LoopMailbox]
    private let listeners: [Int32]
    private let openConnections = ConnectionCounter()
    private let statistics: [LoopStatistics]
    private let handlerPool: HandlerPool
    /// The address actually bound (the real port when asked for port 0).
    public let boundAddress: ListenAddress

    /// Binds one `SO_REUSEPORT` listener per event loop; serving starts with `start()`.
    /// - Parameter accessLog: where access-log lines go; `nil` writes none.
    /// - Throws: `SystemError` naming the failed call (address in use, …).
    public init(
        configuration: HTTPServerConfiguration, router: Router, accessLog: AccessLogConfiguration? = nil
    ) throws(SystemError) {
        signal(SIGPIPE, SIG_IGN)
        _ = Posix.raiseOpenFileLimit(to: configuration.maxConnections + 1024)
        var listeners: [Int32] = []
        var address = configuration.address
        do {
            if address.port != 0 { try Posix.requireFreeAddress(address) }
            for _ in 0..<max(1, configuration.eventLoops) {
                let fd = try Posix.listener(address, backlog: configuration.backlog)
                listeners.append(fd)
                address = ListenAddress(host: address.host, port: Posix.localPort(fd))
            }
            var mailboxes: [LoopMailbox] = []
            for _ in listeners { mailboxes.append(try LoopMailbox()) }
            self.mailboxes = mailboxes
        } catch {
            listeners.forEach(Posix.close)
            throw error
        }
        self.listeners = listeners
        self.statistics = listeners.map { _ in LoopStatistics() }
        self.handlerPool = HandlerPool(threadCount: configuration.handlerThreads)
        self.boundAddress = address
        self.configuration = configuration
        self.router = router
        self.accessLog = accessLog
    }

    /// Open client connections across all loops.
    public var connectionCount: Int { openConnections.value.load(ordering: .relaxed) }

    /// Requests answered since start, by method, route and status, merged across the loops.
    public func requestStatistics() -> RequestStatistics {
        var merged = RequestStatistics()
        let patterns = router.registeredRoutes.map(\.pattern)
        for loop in statistics { loop.add(to: &merged, patterns: patterns) }
        return merged
    }

    /// Starts one thread per event loop, and the handler threads, and returns.
    /// - Throws: `SystemError` if a loop's epoll cannot be created.
    public func start() throws(SystemError) {
        handlerPool.start()
        for ((listener, mailbox), statistics) in zip(zip(listeners, mailboxes), statistics) {
            let loop = try EventLoop(
                listenerFD: listener, mailbox: mailbox, router: router, configuration: configuration,
                openConnections: openConnections, statistics: statistics, handlerPool: handlerPool,
                accessLog: accessLog
            )
            let transfer = LoopTransfer(loop: loop)
            let thread = Thread {
                transfer.loop.run()
                mailbox.finished.signal()
            }
            thread.name = "http-loop"
            thread.start()
        }
    }

    /// Stops gracefully: no new connections, idle ones closed, requests in flight answered (with
    /// `Connection: close`), then returns; what is still open after the deadline is closed.
    public func shutdown() {
        for mailbox in mailboxes {
            mailbox.stopRequested.store(true, ordering: .releasing)
            mailbox.wake()
        }
        for mailbox in mailboxes { mailbox.finished.wait() }
        handlerPool.close()
    }
}

/// Hands a freshly built loop to the thread that will own it.
///
/// - Note: `@unchecked Sendable` is sound: the loop is created, handed over once, and from then on
///   used only by that thread; the creating thread keeps no reference.
private final class LoopTransfer: @unchecked Sendable {
    let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }
}
