/// Everything the HTTP server can be tuned by; each value has a default fit for this service.
public struct HTTPServerConfiguration: Sendable {
    public var address: ListenAddress
    /// Event loop threads, each with its own epoll and `SO_REUSEPORT` listener; one per core.
    public var eventLoops: Int
    /// Threads that run `pool` handlers; this many handlers can block (on the disk) at once.
    public var handlerThreads = 64
    public var backlog: Int32 = 1024
    public var limits = HTTPLimits()
    /// Seconds a client may take to send a whole request once it started (slowloris).
    public var requestTimeout: Double = 10
    /// Seconds an idle keep-alive connection is kept.
    public var idleTimeout: Double = 60
    /// Seconds a response may wait for a client that does not read.
    public var writeTimeout: Double = 30
    /// Open connections at most; past it new ones are closed at once. Lowered to what the
    /// open-file limit allows once `reservedDescriptors` are set aside.
    public var maxConnections = 20_000
    /// Open connections one client address may hold at most (0: no cap), so that one address cannot
    /// take every slot. A proxy in front of the server carries many clients: raise it there.
    public var maxConnectionsPerAddress = 256
    /// Load balancers or proxies whose `Forwarded` / `X-Forwarded-For` name the client (see
    /// `TrustedProxies`); they are also exempt from `maxConnectionsPerAddress`. None by default.
    public var trustedProxies = TrustedProxies()
    /// Descriptors kept for everything but client connections (the database, logs, APNs, threads'
    /// own), so that connections can never exhaust what the rest of the process needs.
    public var reservedDescriptors = 256
    /// Seconds a graceful shutdown waits for in-flight requests before closing what is left.
    public var shutdownDeadline: Double = 10

    /// - Parameters:
    ///   - address: default 127.0.0.1:8080.
    ///   - eventLoops: default 2, the cores of the machine this was measured on.
    public init(address: ListenAddress = .loopback(port: 8080), eventLoops: Int = 2) {
        self.address = address
        self.eventLoops = eventLoops
    }
}
