internal import Telemetry

/// What a loop does with each request besides answering it: gives it an id, counts it in the
/// statistics, writes its access-log line. One per loop, owned by the loop's thread, so none of
/// this takes a lock on the request path; the loop itself only moves bytes.
struct RequestRecorder {
    private let router: Router
    private let statistics: LoopStatistics
    private var accessLog: AccessLogBuffer?
    /// Request ids are this loop's random prefix and a counter: unique per process run, cheap to make.
    private let requestIDPrefix = String(UInt32.random(in: .min ... .max), radix: 16)
    private var requestCounter: UInt64 = 0

    init(router: Router, statistics: LoopStatistics, accessLog: AccessLogConfiguration?) {
        self.router = router
        self.statistics = statistics
        self.accessLog = accessLog.map(AccessLogBuffer.init)
    }

    /// The client's `X-Request-Id` when it is a short token, else a new id.
    mutating func requestID(supplied: String?) -> String {
        if let supplied, (1...64).contains(supplied.utf8.count),
            supplied.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        {
            return supplied
        }
        requestCounter &+= 1
        return requestIDPrefix + "-" + String(requestCounter, radix: 16)
    }

    /// Counts an answered request and logs it.
    mutating func answered(_ request: InFlight, status: Int, bytes: Int, at now: UInt64) {
        let nanoseconds = now >= request.started ? now - request.started : 0
        statistics.record(
            method: LoopStatistics.methodIndex(request.method), route: request.route, status: status,
            seconds: Double(nanoseconds) / 1e9)
        accessLog?.append(
            method: request.method, path: request.path,
            route: request.route >= 0 ? router.pattern(ofRoute: request.route) : nil, requestID: request.requestID,
            status: status, size: bytes, durationNanoseconds: nanoseconds)
    }

    /// Hands this iteration's access-log lines to the log writer; once per loop iteration.
    mutating func endOfIteration() { accessLog?.handOff() }

    /// Hands over what is left and waits until it is written, when the loop stops.
    mutating func finish() {
        accessLog?.handOff()
        accessLog?.configuration.output.flush()
    }
}

/// The request a connection is answering, for its statistics and access log entry.
struct InFlight {
    let method: String
    let path: String
    let started: UInt64
    var requestID = "-"
    /// The router's index of the matched route; `-1` when none matched.
    var route = -1
}
