import Synchronization

/// A one-way switch a service's `run` awaits: opened once by `open()`, from any thread, and from
/// then on every `wait()` returns at once.
public final class ShutdownLatch: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Opens the latch and wakes every waiter; later calls do nothing.
    public func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.isOpen else { return [] }
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the latch is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let parked = state.withLock { state -> Bool in
                guard !state.isOpen else { return false }
                state.waiters.append(continuation)
                return true
            }
            if !parked { continuation.resume() }
        }
    }
}
