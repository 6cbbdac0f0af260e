import Dispatch
import Synchronization

/// Wakes the push worker when a transaction has queued pushes, so a committed change goes out at
/// once instead of at the next poll.
///
/// Signals coalesce: any number of `notify()` calls while the worker is busy leave one pending
/// wake-up, after which the worker drains everything that is due. One worker waits on a signal.
public final class OutboxSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Tells a timeout which wait it belongs to, so a late timer never wakes a newer wait.
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Says that due rows may be waiting; cheap enough to call after every commit.
    public func notify() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Waits for the next signal, or until `timeout` passes (rows scheduled for a later retry have
    /// no commit to signal them).
    func wait(timeout: Duration) async {
        let generation = state.withLock { state -> UInt64? in
            if state.pending {
                state.pending = false
                return nil
            }
            state.generation &+= 1
            return state.generation
        }
        guard let generation else { return }
        // A late timer is harmless: `expire` ignores a wait that is over (its generation moved on).
        let (seconds, attoseconds) = timeout.components
        let delay = Double(seconds) + Double(attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.expire(generation) }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                precondition(state.waiter == nil, "two tasks wait on one OutboxSignal")
                if state.pending || state.generation != generation {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    private func expire(_ generation: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.generation == generation else { return nil }
            state.generation &+= 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
