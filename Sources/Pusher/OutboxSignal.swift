import Dispatch
import Synchronization

/// Wakes the push workers when a transaction has queued pushes, so a committed change goes out at
/// once instead of at the next poll.
///
/// Each worker remembers how many notifications it has seen: a wait returns at once if one came
/// since (so notifies while a worker is busy are never lost, and any number of them coalesce into
/// one wake-up), and otherwise until the next `notify()`, which wakes every waiting worker.
public final class OutboxSignal: Sendable {
    private struct State {
        var notifications: UInt64 = 0
        /// Waits in progress by id; `nil` until the waiting task has parked its continuation.
        var waiters: [UInt64: CheckedContinuation<Void, Never>?] = [:]
        var nextWaitID: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Says that due rows may be waiting; cheap enough to call after every commit.
    public func notify() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.notifications &+= 1
            let woken = state.waiters.values.compactMap { $0 }
            state.waiters.removeAll()
            return woken
        }
        for waiter in woken { waiter.resume() }
    }

    /// Waits for a notification newer than the `seen` count, or until `timeout` passes (rows
    /// scheduled for a later retry have no commit to signal them), or until the task is cancelled.
    /// - Returns: the notification count now seen, for the next call.
    func wait(after seen: UInt64, timeout: Duration) async -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            guard state.notifications == seen else { return nil }
            state.nextWaitID &+= 1
            state.waiters[state.nextWaitID] = .some(nil)
            return state.nextWaitID
        }
        if let id {
            let (seconds, attoseconds) = timeout.components
            let delay = Double(seconds) + Double(attoseconds) / 1e18
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.expire(id) }
            // Cancelling the waiting task ends the wait at once: a stopping worker does not sit out its poll.
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    // A notify, the timer or a cancellation may have ended this wait already (its entry is gone).
                    let parked = state.withLock { state -> Bool in
                        guard state.waiters[id] != nil else { return false }
                        state.waiters[id] = continuation
                        return true
                    }
                    if !parked { continuation.resume() }
                }
            } onCancel: {
                expire(id)
            }
        }
        return state.withLock { $0.notifications }
    }

    private func expire(_ id: UInt64) {
        let waiter = state.withLock { state in state.waiters.removeValue(forKey: id) }
        if let waiter, let continuation = waiter { continuation.resume() }
    }
}
