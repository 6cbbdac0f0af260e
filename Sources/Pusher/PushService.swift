public import Lifecycle
public import Telemetry

/// The push workers as one of the process's services.
///
/// Concurrency: each worker is a task that prefers a `ThreadExecutor` of its own. Its sends block
/// in libcurl and it waits for its bookkeeping writes on that thread, never on one of the
/// cooperative pool's (two on two cores), which the rest of the process needs. One thread per
/// worker (`--push-workers`, 2 by default) is what a batch on the wire costs: the workers claim
/// disjoint activities and send side by side.
public final class PushService: Service {
    public let name = "pusher"
    private let workerCount: Int
    private let makeWorker: @Sendable (Int) throws -> PushWorker
    private let signal: OutboxSignal
    private let logger: Logger
    private let stopAsked = ShutdownLatch()

    /// - Parameter makeWorker: builds worker `index` on its own thread (a worker is not `Sendable`);
    ///   a throw (an APNs client libcurl cannot make) fails the service.
    public init(
        workers workerCount: Int, signal: OutboxSignal, logger: Logger,
        makeWorker: @escaping @Sendable (Int) throws -> PushWorker
    ) {
        self.workerCount = workerCount
        self.makeWorker = makeWorker
        self.signal = signal
        self.logger = logger
    }

    private enum ChildEnd: Sendable {
        case stopAsked
        case workerEnded
    }

    /// Drains the outbox until `beginShutdown`; then each worker finishes its batch and writes its
    /// outcomes (what is still queued is sent by the next start).
    public func run() async throws {
        try await withThrowingTaskGroup(of: ChildEnd.self) { group in
            for index in 0..<workerCount {
                let executor = ThreadExecutor(name: "pusher-\(index)")
                let (makeWorker, signal, logger) = (makeWorker, signal, logger)
                group.addTask(executorPreference: executor) {
                    defer { executor.finish() }
                    let worker = try makeWorker(index)
                    await worker.run(signal: signal) { error in
                        logger.error("pusher.batch_failed", ["error": .string("\(error)")])
                    }
                    return .workerEnded
                }
            }
            let stopAsked = stopAsked
            group.addTask {
                await stopAsked.wait()
                return .stopAsked
            }
            // The first child to end is the stop, unless a worker could not start.
            let first: Result<ChildEnd?, any Error>
            do { first = .success(try await group.next()) } catch { first = .failure(error) }
            stopAsked.open()
            group.cancelAll()
            while true {
                do {
                    guard try await group.next() != nil else { break }
                } catch {
                    continue
                }
            }
            switch first {
            case .failure(let error): throw error
            case .success(.workerEnded): throw PushServiceError.workerEnded
            case .success(.stopAsked), .success(nil): return
            }
        }
    }

    public func beginShutdown() { stopAsked.open() }
}

/// Why the push service ended before it was asked to.
public enum PushServiceError: Error, CustomStringConvertible {
    case workerEnded

    public var description: String { "a push worker ended before the service was stopped" }
}
