import Foundation
import Testing

@testable import Pusher

@Suite("Outbox signal")
struct OutboxSignalTests {
    /// A notify while the worker waits wakes it long before the poll timeout. (The bounds are an hour
    /// wide: other suites block the shared executor's two threads for minutes on a loaded machine, and
    /// a wake-up by the timeout must still be told from one by the notify.)
    @Test func notifyWakesAWaitingWorker() async {
        let signal = OutboxSignal()
        let started = ContinuousClock.now
        async let waited = signal.wait(after: 0, timeout: .seconds(3600))
        try? await Task.sleep(for: .milliseconds(50))
        signal.notify()
        #expect(await waited == 1)
        #expect(ContinuousClock.now - started < .seconds(3000))
    }

    /// Cancelling a waiting worker ends its wait at once, without a notify: a stopping deliveryd does
    /// not sit out the poll (nor hang where timers do not fire, as under libfaketime).
    @Test func cancellationEndsTheWait() async {
        let signal = OutboxSignal()
        let started = ContinuousClock.now
        let waiting = Task { await signal.wait(after: 0, timeout: .seconds(3600)) }
        try? await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        #expect(await waiting.value == 0)
        #expect(ContinuousClock.now - started < .seconds(3000))
    }

    /// Notifies while the worker is busy are not lost: the next wait returns at once, and only once.
    @Test func notifiesCoalesceIntoOnePendingWakeUp() async {
        let signal = OutboxSignal()
        signal.notify()
        signal.notify()
        let started = ContinuousClock.now
        let seen = await signal.wait(after: 0, timeout: .seconds(3600))
        #expect(ContinuousClock.now - started < .seconds(3000))
        let second = ContinuousClock.now
        #expect(await signal.wait(after: seen, timeout: .milliseconds(200)) == seen)
        #expect(ContinuousClock.now - second >= .milliseconds(150))
    }

    /// One notify wakes every waiting worker, and a worker busy at the time sees it on its next wait.
    @Test func notifyWakesEveryWorker() async {
        let signal = OutboxSignal()
        let started = ContinuousClock.now
        async let first = signal.wait(after: 0, timeout: .seconds(3600))
        async let second = signal.wait(after: 0, timeout: .seconds(3600))
        try? await Task.sleep(for: .milliseconds(50))
        signal.notify()
        #expect(await first == 1)
        #expect(await second == 1)
        #expect(ContinuousClock.now - started < .seconds(3000))
        // A third worker that was busy during that notify returns at once.
        let busy = ContinuousClock.now
        #expect(await signal.wait(after: 0, timeout: .seconds(3600)) == 1)
        #expect(ContinuousClock.now - busy < .seconds(3000))
    }
}
