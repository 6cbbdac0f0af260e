public import Telemetry

/// Lines written through a `LogOutput` (standard error, by default) as a service: it is started
/// first and stopped last, so that a stop waits until every line of the other services' stops is
/// written.
public final class LogWriterService: Service {
    public let name = "log"
    private let output: LogOutput
    private let flushTimeout: Double
    private let stop = ShutdownLatch()

    /// - Parameter flushTimeout: how long the last flush waits for a reader that stopped reading.
    public init(output: LogOutput = .standardError, flushTimeout: Double = 2) {
        self.output = output
        self.flushTimeout = flushTimeout
    }

    public func run() async {
        await stop.wait()
        let output = output
        let timeout = flushTimeout
        _ = await runBlocking(threadName: "log-flush") { output.flush(timeout: timeout) }
    }

    public func beginShutdown() { stop.open() }
}
