import Foundation
import Synchronization
import Telemetry
import Testing

@testable import Lifecycle

/// What the test services did, in order, shared by the services of one group.
final class Journal: Sendable {
    private let entries = Mutex<[String]>([])

    func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }

    /// Waits until `entry` is written; a failing test ends at its time limit instead.
    func waitFor(_ entry: String) async {
        while !all.contains(entry) { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

/// A service that records its life in a journal; it may fail at once or ignore the stop.
final class RecordingService: Service {
    enum Behaviour: Sendable {
        case serves
        case failsAtStart
        /// Stops only once `release` opens, whatever the group asks.
        case ignoresStop(release: ShutdownLatch)
    }

    struct Refused: Error {}

    let name: String
    private let journal: Journal
    private let behaviour: Behaviour
    private let stop = ShutdownLatch()

    init(_ name: String, journal: Journal, behaviour: Behaviour = .serves) {
        self.name = name
        self.journal = journal
        self.behaviour = behaviour
    }

    func run() async throws {
        journal.record("run \(name)")
        switch behaviour {
        case .serves: await stop.wait()
        case .failsAtStart: throw Refused()
        case .ignoresStop(let release): await release.wait()
        }
        journal.record("stopped \(name)")
    }

    func beginShutdown() {
        journal.record("stop \(name)")
        stop.open()
    }
}

@Suite("Service group", .timeLimit(.minutes(1)))
struct ServiceGroupTests {
    private let logger = Logger(label: "test", minimumLevel: .error) { _ in }

    /// Every service's `stop` comes only after the one started after it has returned.
    @Test func stopsServicesInReverseOrderOfStart() async {
        let journal = Journal()
        let group = ServiceGroup(
            ["a", "b", "c"].map { .init(RecordingService($0, journal: journal), stopTimeout: .seconds(30)) },
            logger: logger)
        let running = Task { await group.run() }
        for name in ["a", "b", "c"] { await journal.waitFor("run \(name)") }
        group.shutdown(reason: "test")
        let outcome = await running.value
        #expect(outcome.isClean)
        #expect(
            journal.all.filter { !$0.hasPrefix("run") }
                == ["stop c", "stopped c", "stop b", "stopped b", "stop a", "stopped a"])
    }

    /// A service that fails takes the group down: the others stop in reverse order, and the
    /// outcome names it.
    @Test func aFailingServiceStopsTheOthers() async {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init(RecordingService("a", journal: journal), stopTimeout: .seconds(30)),
                .init(RecordingService("b", journal: journal, behaviour: .failsAtStart), stopTimeout: .seconds(30)),
                .init(RecordingService("c", journal: journal), stopTimeout: .seconds(30)),
            ], logger: logger)
        let outcome = await group.run()
        #expect(outcome.failed == ["b"])
        #expect(outcome.timedOut.isEmpty)
        #expect(!outcome.isClean)
        let stops = journal.all.filter { $0.hasPrefix("stop") }
        #expect(stops == ["stop c", "stopped c", "stop a", "stopped a"])
    }

    /// A service that does not stop in time is named, and the ones started before it still stop.
    @Test func aServicePastItsStopTimeoutDoesNotHoldUpTheOthers() async {
        let journal = Journal()
        let release = ShutdownLatch()
        let group = ServiceGroup(
            [
                .init(RecordingService("a", journal: journal), stopTimeout: .seconds(30)),
                .init(
                    RecordingService("b", journal: journal, behaviour: .ignoresStop(release: release)),
                    stopTimeout: .milliseconds(100)),
            ], logger: logger)
        group.shutdown(reason: "test")
        let outcome = await group.run()
        #expect(outcome.timedOut == ["b"])
        #expect(outcome.failed.isEmpty)
        #expect(journal.all.contains("stopped a"))
        #expect(!journal.all.contains("stopped b"))
        release.open()
        await journal.waitFor("stopped b")
    }

    /// A stop asked for before the group runs still starts and stops every service, cleanly.
    @Test func aShutdownBeforeRunStopsEveryServiceCleanly() async {
        let journal = Journal()
        let group = ServiceGroup(
            ["a", "b"].map { .init(RecordingService($0, journal: journal), stopTimeout: .seconds(30)) },
            logger: logger)
        group.shutdown(reason: "test")
        group.shutdown(reason: "twice")
        let outcome = await group.run()
        #expect(outcome.isClean)
        #expect(journal.all.contains("stopped a") && journal.all.contains("stopped b"))
    }
}
