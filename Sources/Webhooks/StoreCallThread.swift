internal import Dispatch
internal import Foundation
internal import Storage
internal import Synchronization

/// Runs the webhook dispatcher's store calls on a thread at the process's own priority.
///
/// The dispatcher's thread runs niced, so that webhooks give way to requests on busy cores. Its
/// store calls must not: a caller that waits for a group commit may lead the group, whose
/// transaction holds every other writer's changes (a priority inversion on the one writer), and a
/// thread that Dispatch starts from a niced caller inherits its niceness for whatever it runs later.
/// The dispatcher hands each call here and waits for it; one call at a time, in order.
final class StoreCallThread: Sendable {
    private struct Slot {
        var call: (@Sendable () -> Void)?
        var closed = false
    }

    /// Where one call's outcome waits for its caller.
    private final class Outcome<Value: Sendable>: Sendable {
        let value = Mutex<Result<Value, StorageError>?>(nil)
    }

    private let slot = Mutex(Slot())
    private let callReady = DispatchSemaphore(value: 0)
    private let callDone = DispatchSemaphore(value: 0)

    /// Starts the thread from the caller's thread, so it has the caller's priority.
    init(name: String) {
        let thread = Thread { [self] in serve() }
        thread.name = name
        thread.start()
    }

    /// Runs `work` on the thread and returns what it returned or threw. Not reentrant: one caller.
    func run<Result: Sendable>(_ work: @escaping @Sendable () throws(StorageError) -> Result) throws(StorageError)
        -> Result
    {
        let outcome = Outcome<Result>()
        let handedOver = slot.withLock { slot in
            if slot.closed { return false }
            slot.call = { outcome.value.withLock { $0 = Swift.Result { () throws(StorageError) in try work() } } }
            return true
        }
        // After `close` nothing serves: the caller runs it (only a late call of a stopping dispatcher).
        guard handedOver else { return try work() }
        callReady.signal()
        callDone.wait()
        // Set by the thread before it signalled `callDone`.
        return try outcome.value.withLock { $0! }.get()
    }

    /// Ends the thread once the call in progress, if any, returned.
    func close() {
        slot.withLock { $0.closed = true }
        callReady.signal()
    }

    private func serve() {
        while true {
            callReady.wait()
            let (call, closed) = slot.withLock { slot in
                defer { slot.call = nil }
                return (slot.call, slot.closed)
            }
            if let call {
                call()
                callDone.signal()
            }
            if closed { return }
        }
    }
}
