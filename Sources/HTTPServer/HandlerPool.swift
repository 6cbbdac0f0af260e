internal import Foundation

/// The threads that run `pool` handlers: a fixed number, so that handlers which block (a write
/// waiting for its group's disk sync) can all be waiting at once.
///
/// Dispatch's global queue keeps about as many threads as cores and adds more only slowly when they
/// block; with handlers that wait on the disk that capped the writes in flight, and so the writes
/// one commit could carry, at a handful. Here up to `threadCount` handlers block at once while the
/// event loops go on serving.
final class HandlerPool: Sendable {
    private let jobs = JobQueue()
    private let threadCount: Int

    init(threadCount: Int) {
        self.threadCount = max(1, threadCount)
    }

    /// Starts the threads; call once.
    func start() {
        for index in 0..<threadCount {
            let jobs = self.jobs
            let thread = Thread {
                while let job = jobs.next() { job() }
            }
            thread.name = "http-handler-\(index)"
            thread.stackSize = 512 * 1024
            thread.start()
        }
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.append(job)
    }

    /// Lets the threads end once the queue is empty (the pool cannot be used afterwards).
    func close() {
        jobs.close()
    }
}

/// A FIFO of jobs that idle threads wait on.
///
/// - Note: `@unchecked Sendable` is sound: `pending` and `closed` are touched only while `condition`
///   is locked.
private final class JobQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending: [@Sendable () -> Void] = []
    private var head = 0
    private var closed = false

    func append(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        pending.append(job)
        condition.unlock()
        condition.signal()
    }

    /// The next job, waiting for one; nil once closed and drained.
    func next() -> (@Sendable () -> Void)? {
        condition.lock()
        defer { condition.unlock() }
        while head == pending.count {
            if closed { return nil }
            condition.wait()
        }
        let job = pending[head]
        head += 1
        if head > 1024 && head * 2 > pending.count {
            pending.removeFirst(head)
            head = 0
        }
        return job
    }

    func close() {
        condition.lock()
        closed = true
        condition.unlock()
        condition.broadcast()
    }
}
