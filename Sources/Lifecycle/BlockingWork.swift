import Foundation

/// Runs `work`, which blocks (a join, a flush, a wait on a semaphore), on a thread of its own and
/// returns its result to the awaiting task, so that no thread of Swift's cooperative pool (two on
/// this machine's two cores) is held while it waits.
public func runBlocking<Result: Sendable>(
    threadName: String, _ work: @escaping @Sendable () -> Result
) async -> Result {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.name = threadName
        thread.start()
    }
}
