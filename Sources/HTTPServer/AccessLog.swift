import JSONSyntax
public import Telemetry

#if canImport(Glibc)
    internal import Glibc
#endif

/// The access log: one JSON line per answered request, with method, path (no query string), route,
/// status, size, duration and request id only, so no credential or private field can reach it.
///
/// Each event loop builds its lines straight into its own byte buffer (no dictionary, no per-line
/// date formatting: the second is formatted once) and hands the buffer to `output` once per loop
/// iteration, or sooner when it fills; `output` writes it on its own thread, so a slow disk or pipe
/// never stalls a loop, and drops under backpressure are counted, never silent.
public struct AccessLogConfiguration: Sendable {
    public var output: LogOutput
    /// Paths starting with one of these are logged as their route: `/v1/customers/{customerId}/…`
    /// rather than a person's identifier.
    public var pathsLoggedAsRoute: [String]

    public init(output: LogOutput = .standardError, pathsLoggedAsRoute: [String] = []) {
        self.output = output
        self.pathsLoggedAsRoute = pathsLoggedAsRoute
    }
}

/// One loop's pending access-log lines. Owned by the loop's thread.
struct AccessLogBuffer {
    /// Past this many bytes the lines are handed over at once rather than at the end of the iteration.
    static let handOffBytes = 64 * 1024

    let configuration: AccessLogConfiguration
    private(set) var bytes: [UInt8] = []
    private(set) var lines = 0
    private var cachedSecond = -1
    /// `{"time":"2026-12-03T13:39:53.`, for `cachedSecond`.
    private var secondPrefix: [UInt8] = []

    init(configuration: AccessLogConfiguration) {
        self.configuration = configuration
        bytes.reserveCapacity(Self.handOffBytes + 1024)
    }

    /// Appends one line: the same fields, in the same order, as the application logger writes.
    mutating func append(
        method: String, path: String, route: String?, requestID: String, status: Int, size: Int,
        durationNanoseconds: UInt64
    ) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec != cachedSecond { cacheSecond(now.tv_sec) }
        bytes += secondPrefix
        appendDigits(Int(now.tv_nsec / 1_000_000), width: 3)
        bytes += #"Z","level":"info","logger":"http","message":"http.request","http.request.method":"#.utf8
        JSONText.appendQuoted(method, to: &bytes)
        bytes += #","http.response.size":"#.utf8
        appendDigits(size, width: 1)
        bytes += #","http.response.status_code":"#.utf8
        appendDigits(status, width: 1)
        if let route {
            bytes += #","http.route":"#.utf8
            JSONText.appendQuoted(route, to: &bytes)
        }
        bytes += #","http.server.request.duration":"#.utf8
        appendDigits(Int(durationNanoseconds / 1_000_000_000), width: 1)
        bytes.append(UInt8(ascii: "."))
        appendDigits(Int(durationNanoseconds % 1_000_000_000 / 1000), width: 6)
        bytes += #","request.id":"#.utf8
        JSONText.appendQuoted(requestID, to: &bytes)
        bytes += #","url.path":"#.utf8
        if let route, configuration.pathsLoggedAsRoute.contains(where: path.hasPrefix) {
            JSONText.appendQuoted(route, to: &bytes)
        } else {
            JSONText.appendQuoted(path, to: &bytes)
        }
        bytes += "}\n".utf8
        lines += 1
        if bytes.count >= Self.handOffBytes { handOff() }
    }

    /// Gives the pending lines to the output; called at the end of every loop iteration.
    mutating func handOff() {
        guard lines > 0 else { return }
        configuration.output.submit(bytes, lines: lines)
        bytes.removeAll(keepingCapacity: true)
        lines = 0
    }

    private mutating func cacheSecond(_ second: Int) {
        cachedSecond = second
        var time = time_t(second)
        var parts = tm()
        gmtime_r(&time, &parts)
        var prefix = Array(#"{"time":""#.utf8)
        for (value, width, separator) in [
            (Int(parts.tm_year) + 1900, 4, "-"), (Int(parts.tm_mon) + 1, 2, "-"), (Int(parts.tm_mday), 2, "T"),
            (Int(parts.tm_hour), 2, ":"), (Int(parts.tm_min), 2, ":"), (Int(parts.tm_sec), 2, "."),
        ] {
            Self.appendDigits(value, width: width, to: &prefix)
            prefix += separator.utf8
        }
        secondPrefix = prefix
    }

    private mutating func appendDigits(_ value: Int, width: Int) { Self.appendDigits(value, width: width, to: &bytes) }

    /// A non-negative integer in decimal, zero-padded to `width`, without building a `String`.
    static func appendDigits(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        var remaining = max(0, value)
        var count = 1
        var probe = remaining / 10
        while probe > 0 {
            count += 1
            probe /= 10
        }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: max(count, width)))
        var index = bytes.count - 1
        repeat {
            bytes[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        } while remaining > 0 && index >= start
    }
}
