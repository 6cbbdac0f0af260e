/// Everything the HTTP server can be tuned by; each value has a default fit for this service.
public struct HTTPServerConfiguration: Sendable {
    public var address: ListenAddress
    /// Event loop threads, each with its own epoll and `SO_REUSEPORT` listener; one per core.
    public var eventLoops: Int
    /// Threads that run `pool` handlers; this many handlers can block (on the disk) at once.
    public var handlerThreads: Int
    public var backlog: Int32
    public var limits: HTTPLimits
    /// Seconds a client may take to send a whole request once it started (slowloris).
    public var requestTimeout: Double
    /// Seconds an idle keep-alive connection is kept.
    public var idleTimeout: Double
    /// Seconds a response may wait for a client that does not read.
    public var writeTimeout: Double
    /// Open connections at most; past it new ones are closed at once. Lowered to what the
    /// open-file limit allows once `reservedDescriptors` are set aside.
    public var maxConnections: Int
    /// Open connections one client address may hold at most (0: no cap), so that one address cannot
    /// take every slot. A proxy in front of the server carries many clients: raise it there.
    public var maxConnectionsPerAddress: Int
    /// Load balancers or proxies whose `Forwarded` / `X-Forwarded-For` name the client (see
    /// `TrustedProxies`); they are also exempt from `maxConnectionsPerAddress`. None by default.
    public var trustedProxies: TrustedProxies
    /// Descriptors kept for everything but client connections (the database, logs, APNs, threads'
    /// own), so that connections can never exhaust what the rest of the process needs.
    public var reservedDescriptors: Int
    /// Seconds a graceful shutdown waits for in-flight requests before closing what is left.
    public var shutdownDeadline: Double

    /// Defaults: 127.0.0.1:8080, 2 loops, 64 handler threads, backlog 1024, `HTTPLimits()`, 10 s to send a request, 60 s
    /// idle, 30 s write, 20,000 connections (fewer if the open-file limit is lower), 256 per address,
    /// 256 descriptors reserved, 10 s shutdown deadline.
    public init(
        address: ListenAddress = ListenAddress(host: "127.0.0.1", port: 8080), eventLoops: Int = 2,
        handlerThreads: Int = 64,
        backlog: Int32 = 1024, limits: HTTPLimits = HTTPLimits(), requestTimeout: Double = 10, idleTimeout: Double = 60,
        writeTimeout: Double = 30, maxConnections: Int = 20_000, maxConnectionsPerAddress: Int = 256,
        reservedDescriptors: Int = 256, trustedProxies: TrustedProxies = TrustedProxies(), shutdownDeadline: Double = 10
    ) {
        self.trustedProxies = trustedProxies
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.reservedDescriptors = reservedDescriptors
        self.address = address
        self.eventLoops = eventLoops
        self.handlerThreads = handlerThreads
        self.backlog = backlog
        self.limits = limits
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.maxConnections = maxConnections
        self.shutdownDeadline = shutdownDeadline
    }
}
