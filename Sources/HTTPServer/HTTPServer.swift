internal import Foundation
public import Lifecycle
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
    private let connectionTable: ConnectionTable
    private let statistics: [LoopStatistics]
    private let handlerPool: HandlerPool
    private let stopAsked = ShutdownLatch()
    /// The address actually bound (the real port when asked for port 0).
    public let boundAddress: ListenAddress

    /// Binds one `SO_REUSEPORT` listener per event loop; serving starts with `start()`.
    /// - Parameter accessLog: where access-log lines go; `nil` writes none.
    /// - Throws: `SystemError` naming the failed call (address in use, …).
    public init(
        configuration: HTTPServerConfiguration, router: Router, accessLog: AccessLogConfiguration? = nil
    ) throws(SystemError) {
        signal(SIGPIPE, SIG_IGN)
        let connectionLimit = try Self.connectionLimit(configuration)
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
        self.connectionTable = ConnectionTable(
            limit: connectionLimit, perAddressLimit: max(0, configuration.maxConnectionsPerAddress),
            exempt: configuration.trustedProxies)
        self.handlerPool = HandlerPool(threadCount: configuration.handlerThreads)
        self.boundAddress = address
        self.configuration = configuration
        self.router = router
        self.accessLog = accessLog
    }

    /// Open client connections across all loops.
    public var connectionCount: Int { connectionTable.count }

    /// Connections open, the limit in force, and what was refused since start.
    public var connectionStatistics: ConnectionStatistics { connectionTable.statistics }

    /// The fewest descriptors left for connections; below it the server refuses to start.
    static let minimumConnectionLimit = 16

    /// `maxConnections`, lowered so that connections never take the descriptors the rest of the
    /// process needs: the soft open-file limit is raised towards what the cap asks (up to the hard
    /// limit), and `reservedDescriptors` of it are set aside. Running out of descriptors elsewhere
    /// (a thread pool, the database) kills a process; a refused connection does not.
    /// - Throws: `SystemError(function: "getrlimit", errno: EMFILE)` when fewer than 16 would be left.
    static func connectionLimit(_ configuration: HTTPServerConfiguration) throws(SystemError) -> Int {
        let reserve = max(0, configuration.reservedDescriptors)
        let soft = Posix.raiseOpenFileLimit(to: configuration.maxConnections + reserve)
        let available = soft - reserve
        guard available >= minimumConnectionLimit else { throw SystemError(function: "getrlimit", errno: EMFILE) }
        return min(configuration.maxConnections, available)
    }

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
                connectionTable: connectionTable, statistics: statistics, handlerPool: handlerPool,
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

/// The server as one of the process's services.
///
/// Concurrency: one thread per event loop (epoll on non-blocking sockets) and `handlerThreads`
/// threads that run the handlers, which block on the store; the service's task only awaits.
extension HTTPServer: Service {
    public var name: String { "http" }

    /// Serves until `beginShutdown`, then stops as `shutdown()` does.
    public func run() async throws {
        try start()
        await stopAsked.wait()
        await runBlocking(threadName: "http-stop") { self.shutdown() }
    }

    public func beginShutdown() { stopAsked.open() }
}
