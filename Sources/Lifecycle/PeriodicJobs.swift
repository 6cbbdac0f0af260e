import Dispatch

/// A piece of maintenance that runs every `interval` (a checkpoint, a prune, a sample).
public struct PeriodicJob: Sendable {
    public let name: String
    public let interval: Double
    public let firstRunDelay: Double
    public let work: @Sendable () -> Void

    /// - Parameter firstRunDelay: seconds from the start to the first run (0: at once).
    public init(
        _ name: String, every interval: Double, firstRunAfter firstRunDelay: Double,
        work: @escaping @Sendable () -> Void
    ) {
        self.name = name
        self.interval = interval
        self.firstRunDelay = firstRunDelay
        self.work = work
    }
}

/// The maintenance jobs as one service.
///
/// Concurrency: one Dispatch timer per job, each on a serial queue of its own, so that a job never
/// overlaps itself and a long one (an hourly prune of a large database) never delays another (the
/// ride store, four times a second). Jobs may block: these queues are not Swift's cooperative pool.
/// A stop cancels the timers, waits for the runs in progress, and then runs `finalWork` once (the
/// newest state of every ride, stored before the process ends).
public final class PeriodicJobs: Service {
    public let name: String
    private let jobs: [PeriodicJob]
    private let finalWork: @Sendable () -> Void
    private let stop = ShutdownLatch()

    public init(name: String, _ jobs: [PeriodicJob], finally finalWork: @escaping @Sendable () -> Void = {}) {
        self.name = name
        self.jobs = jobs
        self.finalWork = finalWork
    }

    public func run() async {
        let scheduled = jobs.map { job in
            let queue = DispatchQueue(label: "\(name).\(job.name)", qos: .utility)
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + job.firstRunDelay, repeating: job.interval)
            timer.setEventHandler(handler: job.work)
            timer.resume()
            return (timer, queue)
        }
        await stop.wait()
        for (timer, queue) in scheduled {
            timer.cancel()
            // A cancelled timer starts no new run; this waits for the one in progress, if any.
            await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        }
        await runBlocking(threadName: "\(name).final", finalWork)
    }

    public func beginShutdown() { stop.open() }
}
