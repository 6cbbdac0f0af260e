import Foundation
import Synchronization

/// A task executor that is one thread: the tasks that prefer it (`Task(executorPreference:)`) run
/// there, with every default actor they call, so that work that blocks (a batch on the wire in
/// libcurl, a wait for a commit) blocks this thread and never one of the cooperative pool's.
///
/// The thread ends once `finish()` was called and its queue is empty.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private struct Queue: ~Copyable {
        var jobs: [UnownedJob] = []
        var finishing = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    public init(name: String) {
        let thread = Thread { [self] in drain() }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wake.signal()
    }

    /// Lets the thread end once the jobs queued so far have run.
    public func finish() {
        queue.withLock { $0.finishing = true }
        wake.signal()
    }

    private func drain() {
        while true {
            wake.wait()
            let (jobs, finishing) = queue.withLock { queue in
                defer { queue.jobs.removeAll(keepingCapacity: true) }
                return (queue.jobs, queue.finishing)
            }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
            if finishing && queue.withLock({ $0.jobs.isEmpty }) { return }
        }
    }
}
