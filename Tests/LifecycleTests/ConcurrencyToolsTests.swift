import Dispatch
import Foundation
import Synchronization
import Telemetry
import Testing

@testable import Lifecycle

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Thread executors, periodic jobs, stop signals, the log writer", .timeLimit(.minutes(1)))
struct ConcurrencyToolsTests {
    /// Tasks that block on their own executors leave the cooperative pool free: with more of them
    /// blocked than the pool has threads, a task on the pool still runs.
    @Test func blockingTasksOnThreadExecutorsLeaveThePoolFree() async {
        let gate = DispatchSemaphore(value: 0)
        let blockedCount = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let executors = (0..<blockedCount).map { ThreadExecutor(name: "blocked-\($0)") }
        let blocked = executors.map { executor in
            Task(executorPreference: executor) {
                gate.wait()
                return 1
            }
        }
        let onPool = await Task.detached { 42 }.value
        #expect(onPool == 42)
        for _ in blocked { gate.signal() }
        var finished = 0
        for task in blocked { finished += await task.value }
        #expect(finished == blockedCount)
        for executor in executors { executor.finish() }
    }

    /// Jobs run again and again until the stop; then the final work runs once and no job runs again.
    @Test func periodicJobsRunUntilStoppedThenTheFinalWorkRunsOnce() async {
        let runs = Atomic<Int>(0)
        let finals = Atomic<Int>(0)
        let jobs = PeriodicJobs(
            name: "maintenance",
            [PeriodicJob("count", every: 0.005, firstRunAfter: 0) { runs.add(1, ordering: .relaxed) }],
            finally: { finals.add(1, ordering: .relaxed) })
        let running = Task { await jobs.run() }
        while runs.load(ordering: .relaxed) < 3 { try? await Task.sleep(for: .milliseconds(5)) }
        jobs.beginShutdown()
        await running.value
        #expect(finals.load(ordering: .relaxed) == 1)
        let afterStop = runs.load(ordering: .relaxed)
        try? await Task.sleep(for: .milliseconds(50))
        #expect(runs.load(ordering: .relaxed) == afterStop)
    }

    /// A stop signal becomes a call with the signal's name, and does not kill the process.
    @Test func aStopSignalBecomesACall() async {
        let received = ShutdownLatch()
        let names = Mutex<[String]>([])
        let signals = StopSignals([SIGUSR2]) { name in
            names.withLock { $0.append(name) }
            received.open()
        }
        // The source is registered asynchronously, and a signal sent before that is ignored: send
        // it until one arrives.
        while !received.isOpen {
            kill(getpid(), SIGUSR2)
            try? await Task.sleep(for: .milliseconds(10))
        }
        let delivered = names.withLock { $0 }
        #expect(!delivered.isEmpty && delivered.allSatisfy { $0 == "SIGUSR2" })
        withExtendedLifetime(signals) {}
    }

    /// The log writer's stop returns once every line submitted before it is written.
    @Test func theLogWriterStopsOnceEveryLineIsWritten() async {
        let written = Mutex<[UInt8]>([])
        let output = LogOutput { batch in
            usleep(2_000)  // a slow reader: lines are still queued when the stop begins
            written.withLock { $0 += batch }
            return 0
        }
        let service = LogWriterService(output: output)
        let running = Task { await service.run() }
        for index in 0..<200 { output.submit(line: "line \(index)\n") }
        service.beginShutdown()
        await running.value
        let lines = String(decoding: written.withLock { $0 }, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 200)
        #expect(lines.last == "line 199")
    }
}
