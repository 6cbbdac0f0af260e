import Foundation
import Testing

@testable import Pusher

@Suite("Outbox signal")
struct OutboxSignalTests {
    /// A notify while the worker waits wakes it long before the poll timeout. (The bounds are wide:
    /// other suites block the shared executor's threads for seconds at a time.)
    @Test func notifyWakesAWaitingWorker() async {
        let signal = OutboxSignal()
        let started = ContinuousClock.now
        async let waited: Void = signal.wait(timeout: .seconds(600))
        try? await Task.sleep(for: .milliseconds(50))
        signal.notify()
        await waited
        #expect(ContinuousClock.now - started < .seconds(300))
    }

    /// Notifies while the worker is busy are not lost: the next wait returns at once, and only once.
    @Test func notifiesCoalesceIntoOnePendingWakeUp() async {
        let signal = OutboxSignal()
        signal.notify()
        signal.notify()
        let started = ContinuousClock.now
        await signal.wait(timeout: .seconds(600))
        #expect(ContinuousClock.now - started < .seconds(300))
        let second = ContinuousClock.now
        await signal.wait(timeout: .milliseconds(200))
        #expect(ContinuousClock.now - second >= .milliseconds(150))
    }
}
