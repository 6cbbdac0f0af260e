import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import Synchronization
import TestSupport
import Testing

@Suite("Group commit")
struct GroupCommitTests {
    /// Many threads writing at once share transactions, yet each write keeps its own outcome: a
    /// refused change rolls back alone, the accepted ones around it all commit.
    @Test func concurrentWritesKeepTheirOwnOutcomes() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        let orderCount = 48
        for index in 0..<orderCount { _ = try StoreFixtures.seed(database, id: "o-\(index)") }
        let before = database.commitStatistics.snapshot

        let outcomes = OutcomeLog()
        let group = DispatchGroup()
        for index in 0..<orderCount {
            let thread = Thread {
                let id = "o-\(index)"
                outcomes.add(id, "preparing", Result { try StoreFixtures.setStatus(database, id, .preparing) })
                outcomes.add(id, "placed", Result { try StoreFixtures.setStatus(database, id, .placed) })
                outcomes.add(id, "pickup", Result { try StoreFixtures.setStatus(database, id, .pickup) })
                group.leave()
            }
            group.enter()
            thread.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)

        for index in 0..<orderCount {
            let id = "o-\(index)"
            #expect(outcomes.outcome(id, "preparing")?.transition == "applied")
            #expect(outcomes.outcome(id, "placed")?.refusal == .illegalTransition)
            #expect(outcomes.outcome(id, "pickup")?.transition == "applied")
            #expect(try database.order(id: id)?.status == .pickup)
            #expect(try database.events(orderID: id).map(\.to) == [.placed, .preparing, .pickup])
        }
        let after = database.commitStatistics.snapshot
        #expect(after.writes - before.writes == orderCount * 3)
        #expect(after.commits - before.commits <= orderCount * 3)
        #expect(after.largest >= 1 && after.largest <= 256)
        // Every commit was confirmed by a sync of the WAL (synchronous=full), one sync covering
        // every commit that returned before it began.
        #expect(after.transactionSeconds > before.transactionSeconds)
        #expect(after.syncs > before.syncs)
        #expect(after.syncs - before.syncs <= after.commits - before.commits)
        #expect(after.syncSeconds > before.syncSeconds)
    }

    /// With `synchronous=full` the writer commits without waiting for the disk and a sync of the WAL
    /// beside it confirms the commits: no write is answered before a sync that began after its commit
    /// ended, whether its caller waits or gets a completion.
    @Test func writesAreAnsweredOnlyAfterASyncThatFollowsTheirCommit() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        let statistics = database.commitStatistics
        let violations = Violations()
        let group = DispatchGroup()
        // Syncs finished when a write ran: the one that confirms it must finish after that.
        @Sendable func check(_ name: String, _ result: Result<Int, any Error>) {
            switch result {
            case .success(let syncsBefore):
                let syncsAfter = statistics.snapshot.syncs
                if syncsAfter <= syncsBefore { violations.add("\(name): \(syncsBefore) → \(syncsAfter)") }
            case .failure(let error): violations.add("\(name): \(error)")
            }
        }
        for index in 0..<64 {
            group.enter()
            database.write({ _ in statistics.snapshot.syncs }) { result in
                check("completion \(index)", result)
                group.leave()
            }
            group.enter()
            Thread {
                check("waiting \(index)", Result { try database.write { _ in statistics.snapshot.syncs } })
                group.leave()
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(violations.all == [])
        #expect(statistics.snapshot.syncs >= 1)
    }

    /// While writes are queued the committer's own thread leads every group: a waiting caller queued
    /// behind a running group is run and answered from there, not woken to lead a group of its own
    /// (a hand-over in which the writer did nothing).
    @Test func aWaitingCallerQueuedBehindAGroupIsRunByTheCommittersThread() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        finished.enter()
        // A write with a completion holds the writer until released.
        database.write({ _ in
            holding.signal()
            release.wait()
            return 0
        }) { _ in finished.leave() }
        holding.wait()
        let threads = Mutex<(caller: pthread_t?, body: pthread_t?)>((nil, nil))
        finished.enter()
        Thread {
            threads.withLock { $0.caller = pthread_self() }
            _ = try? database.write { _ in threads.withLock { $0.body = pthread_self() } }
            finished.leave()
        }.start()
        // Released once the caller's write is queued behind the running group.
        let deadline = Date().addingTimeInterval(30)
        while database.queuedWrites == 0 && Date() < deadline { usleep(1_000) }
        #expect(database.queuedWrites == 1)
        release.signal()
        #expect(finished.wait(timeout: .now() + 30) == .success)
        let (caller, body) = threads.withLock { $0 }
        guard let caller, let body else {
            Issue.record("the waiting write did not run")
            return
        }
        #expect(pthread_equal(caller, body) == 0, "the caller was woken to lead its own group")
    }

    /// With `synchronous=normal` nothing syncs beside the writer: a commit is answered when it returns.
    @Test func normalSynchronousAnswersAtCommit() throws {
        let directory = try TemporaryDirectory()
        let database = try Database.open(StorageConfiguration(dataDirectory: directory.path, synchronous: .normal))
        _ = try StoreFixtures.seed(database, id: "o-1")
        #expect(try StoreFixtures.setStatus(database, "o-1", .preparing).outcome.transitionName == "applied")
        #expect(database.commitStatistics.snapshot.commits >= 2)
        #expect(database.commitStatistics.snapshot.syncs == 0)
    }

    /// A write that throws inside a group leaves nothing behind, even its partial statements.
    @Test func refusedWriteLeavesNoPartialRows() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        _ = try StoreFixtures.seed(database, id: "o-1", activities: 2)
        let depth = try database.outboxDepth().count
        do {
            _ = try database.change(orderID: "o-1", now: StoreFixtures.t0) { order throws(OrderError) in
                _ = try order.applying(StatusChange(status: .preparing), by: .admin, at: StoreFixtures.t0)
                throw OrderError(.illegalTransition, "refused after the change was computed")
            }
            Issue.record("the refused change was stored")
        } catch {
            #expect((error as? OrderError)?.code == .illegalTransition, "the domain's refusal, not wrapped")
        }
        #expect(try database.order(id: "o-1")?.status == .placed)
        #expect(try database.outboxDepth().count == depth)
        #expect(try StoreFixtures.setStatus(database, "o-1", .preparing).outcome.transitionName == "applied")
    }
}

/// Broken expectations noted from several threads.
private final class Violations: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// Outcomes recorded from several threads.
private final class OutcomeLog: Sendable {
    struct Outcome: Sendable {
        var transition: String?
        var refusal: OrderError.Code?
    }

    private let entries = Mutex<[String: Outcome]>([:])

    func add(_ id: String, _ step: String, _ result: Result<StoredChange, any Error>) {
        let outcome: Outcome
        switch result {
        case .success(let stored): outcome = Outcome(transition: stored.outcome.transitionName)
        case .failure(let error): outcome = Outcome(refusal: (error as? OrderError)?.code)
        }
        entries.withLock { $0["\(id)/\(step)"] = outcome }
    }

    func outcome(_ id: String, _ step: String) -> Outcome? { entries.withLock { $0["\(id)/\(step)"] } }
}
