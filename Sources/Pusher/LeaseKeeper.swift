internal import Foundation
internal import Storage
import Synchronization
internal import Telemetry

/// Moves the leases of the rows a worker holds (a batch in flight, or outcomes not written yet)
/// forward every third of the lease, on a thread of its own, so that a batch slower than its lease (a
/// loaded machine, a slow APNs) is not claimed again and pushed twice. A dead worker's rows still
/// come back: nothing extends them any more.
final class LeaseKeeper: Sendable {
    private let held = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)

    init(store: any DeliveryStore, owner: String, lease: TimeInterval, logger: Logger) {
        let interval = max(0.05, lease / 3)
        let thread = Thread { [self] in
            while !stopped.load(ordering: .relaxed) {
                _ = wake.wait(timeout: .now() + interval)
                guard !stopped.load(ordering: .relaxed), held.load(ordering: .relaxed) else { continue }
                do {
                    _ = try store.extendLeases(owner: owner, until: Date().addingTimeInterval(lease))
                } catch {
                    logger.warning("push.lease_extension_failed", ["error": .string("\(error)")])
                }
            }
        }
        thread.name = "pusher-leases"
        thread.start()
    }

    func holding(_ value: Bool) { held.store(value, ordering: .relaxed) }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        wake.signal()
    }
}

/// The error of the last background write, handed to the worker's next call.
final class FailureBox: Sendable {
    private let error = Mutex<(any Error)?>(nil)

    func store(_ failure: any Error) { error.withLock { $0 = failure } }
    func take() -> (any Error)? { error.withLock { $0.take() } }
}
