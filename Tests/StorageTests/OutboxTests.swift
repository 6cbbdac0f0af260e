import DeliveryActivityContract
import Foundation
import OrderDomain
import TestSupport
import Testing

@testable import Storage

@Suite("Outbox")
struct OutboxTests {
    /// Claimed rows are leased: a second worker gets nothing until the lease runs out, then the same rows.
    @Test(arguments: StoreBackend.all)
    func leaseBringsBackRowsOfACrashedWorker(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database, activities: 2)
        _ = try StoreFixtures.setStatus(database, "o-1", .preparing)
        let t = StoreFixtures.t0
        let first = try database.claimDue(owner: "a", now: t, lease: 30, limit: 10)
        #expect(first.count == 2)
        #expect(first.allSatisfy { $0.attempts == 1 })
        #expect(try database.claimDue(owner: "b", now: t.addingTimeInterval(29), lease: 30, limit: 10).isEmpty)
        let again = try database.claimDue(owner: "b", now: t.addingTimeInterval(31), lease: 30, limit: 10)
        #expect(again.map(\.id) == first.map(\.id))
        #expect(again.allSatisfy { $0.attempts == 2 })
    }

    /// 100 updates queued for one activity while nothing is sent coalesce to one row: the newest.
    @Test(arguments: StoreBackend.all)
    func pendingUpdatesCoalesce(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database)
        var lastEvent: Int64?
        for step in 0..<100 {
            let at = StoreFixtures.t0.addingTimeInterval(Double(step))
            let stored = try database.change(orderID: "o-1", now: at) { order throws(OrderError) in
                try order.changingEstimatedArrival(
                    to: StoreFixtures.t0.addingTimeInterval(1800 + Double(step + 1) * 60), by: .admin, at: at)
            }
            lastEvent = stored?.eventID
        }
        #expect(try database.outboxDepth().count == 1)
        let claimed = try database.claimDue(
            owner: "w", now: StoreFixtures.t0.addingTimeInterval(200), lease: 30, limit: 10)
        #expect(claimed.count == 1)
        // The last change's event (which PostgreSQL's change does not return: `countsQueuedPushes`).
        let newest = try StoreFixtures.newestEventID(database, "o-1")
        #expect(claimed.first?.eventID == newest)
        #expect(lastEvent == (backend.countsQueuedPushes ? newest : nil))
    }

    /// A seeded store whose order o-1's push (of `preparing`) is claimed by worker `w` while the order
    /// moves on to `pickup`, which queues a newer row for the same activity.
    static func rowInFlightBehindAChange(_ backend: StoreBackend, _ place: StoreContractTests.Place) throws
        -> (any DeliveryStore, OutboxItem)
    {
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database)
        _ = try StoreFixtures.setStatus(database, "o-1", .preparing)
        let claimed = try database.claimDue(owner: "w", now: StoreFixtures.t0, lease: 30, limit: 10)
        let inFlight = try #require(claimed.first)
        _ = try StoreFixtures.setStatus(database, "o-1", .pickup)
        return (database, inFlight)
    }

    /// While a row of an activity is in flight, a newer row for it waits; a retry of the old one is superseded.
    @Test(arguments: StoreBackend.all)
    func inFlightTargetIsNotRaced(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let (database, inFlight) = try Self.rowInFlightBehindAChange(backend, place)
        let t = StoreFixtures.t0
        #expect(try database.claimDue(owner: "w", now: t, lease: 30, limit: 10).isEmpty)
        try database.scheduleRetry(inFlight, at: t.addingTimeInterval(5), error: "503", now: t)
        let next = try database.claimDue(owner: "w", now: t.addingTimeInterval(10), lease: 30, limit: 10)
        #expect(next.count == 1)
        #expect(next.first?.id != inFlight.id)
    }

    /// Two pending rows of one activity (a retry written beside a change on PostgreSQL leaves them)
    /// are never claimed together: the newest goes first, the older once the newer is finished.
    @Test(arguments: StoreBackend.all)
    func onlyTheNewestPendingRowOfATargetIsClaimed(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let (database, inFlight) = try Self.rowInFlightBehindAChange(backend, place)
        let t = StoreFixtures.t0
        // What the retry's transaction writes when it cannot see the change's row yet.
        let sql = try #require(database as? any SQLStore)
        try sql.writeSession { connection in
            try connection.cached(
                "UPDATE outbox SET state = 'pending', lease_owner = NULL, lease_until = NULL WHERE id = ?"
            ).run([.integer(inFlight.id)])
        }
        #expect(try database.outboxDepth().count == 2)
        let first = try database.claimDue(owner: "w", now: t.addingTimeInterval(1), lease: 30, limit: 10)
        #expect(first.count == 1)
        let newer = try #require(first.first)
        #expect(newer.id > inFlight.id)
        #expect(try database.claimDue(owner: "v", now: t.addingTimeInterval(1), lease: 30, limit: 10).isEmpty)
        try database.markSent(newer, now: t.addingTimeInterval(2))
        let then = try database.claimDue(owner: "v", now: t.addingTimeInterval(3), lease: 30, limit: 10)
        #expect(then.map(\.id) == [inFlight.id])
    }

    /// Retries wait for their time; dead letters are listed with their reason and can be replayed.
    @Test(arguments: StoreBackend.all)
    func retryDeadAndReplay(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database)
        let t = StoreFixtures.t0
        _ = try StoreFixtures.setStatus(database, "o-1", .preparing)
        let row = try #require(try database.claimDue(owner: "w", now: t, lease: 30, limit: 1).first)
        try database.scheduleRetry(row, at: t.addingTimeInterval(60), error: "429 TooManyRequests", now: t)
        #expect(try database.claimDue(owner: "w", now: t.addingTimeInterval(59), lease: 30, limit: 1).isEmpty)
        let retried = try #require(
            try database.claimDue(owner: "w", now: t.addingTimeInterval(60), lease: 30, limit: 1).first)
        #expect(retried.id == row.id)
        try database.markDead(row, reason: "TopicDisallowed", now: t.addingTimeInterval(61))
        #expect(try database.deadLetters(limit: 100).map(\.reason) == ["TopicDisallowed"])
        #expect(try database.outboxDepth().count == 0)
        #expect(try database.replayDeadLetters(ids: nil, now: t.addingTimeInterval(70)) == 1)
        #expect(try database.deadLetters(limit: 100).isEmpty)
        #expect(
            try database.claimDue(owner: "w", now: t.addingTimeInterval(70), lease: 30, limit: 1).map(\.id) == [row.id])
        try database.markSent(row, now: t.addingTimeInterval(71))
        #expect(try database.outboxDepth().count == 0)
    }

    /// A 410 removes a token only if it was registered before APNs' timestamp; removal stops its rows.
    @Test(arguments: StoreBackend.all)
    func tokenRemovalHonoursRegistrationTime(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database)
        let t = StoreFixtures.t0
        _ = try database.registerActivity(
            orderID: "o-1", activityID: "act-0", pushToken: "rotated", environment: .development, bundleID: "b",
            shown: nil, now: t.addingTimeInterval(100)
        )
        _ = try StoreFixtures.setStatus(database, "o-1", .preparing)
        #expect(
            try !database.endActivity(
                orderID: "o-1", activityID: "act-0", reason: "Unregistered", now: t.addingTimeInterval(200),
                onlyIfRegisteredBefore: t.addingTimeInterval(50))
        )
        #expect(try database.activity(orderID: "o-1", activityID: "act-0")?.pushToken == "rotated")
        #expect(
            try database.endActivity(
                orderID: "o-1", activityID: "act-0", reason: "Unregistered", now: t.addingTimeInterval(200),
                onlyIfRegisteredBefore: t.addingTimeInterval(150))
        )
        let ended = try #require(try database.activity(orderID: "o-1", activityID: "act-0"))
        #expect(ended.pushToken == "")
        #expect(ended.endedReason == "Unregistered")
        #expect(ended.startedAt == t)
        #expect(try database.outboxDepth().count == 0)
        #expect(try database.liveActivities(orderID: "o-1").isEmpty)
    }

    /// Old finished rows, old push log entries and old ended activities are pruned; live data stays.
    @Test func pruneAndBackup() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        _ = try StoreFixtures.seed(database, activities: 2)
        let t = StoreFixtures.t0
        _ = try StoreFixtures.setStatus(database, "o-1", .preparing)
        for (index, row) in try database.claimDue(owner: "w", now: t, lease: 30, limit: 10).enumerated() {
            let attempt = PushAttempt(
                orderID: "o-1", targetID: "act-0", event: "update", priority: 5, httpStatus: 200, reason: nil,
                apnsID: "id", latencyMilliseconds: 3, attemptedAt: t)
            try database.markSent(row, now: t, attempt: index == 0 ? attempt : nil)
        }
        try database.endActivity(orderID: "o-1", activityID: "act-1", reason: "user", now: t)
        #expect(try database.prune(now: t.addingTimeInterval(3600)) == PruneReport())
        let report = try database.prune(now: t.addingTimeInterval(31 * 86_400))
        // The two registrations' pushes, superseded by the change; the change's two sent updates went
        // when they were sent.
        #expect(report.activities == 1 && report.pushLog == 1 && report.outbox == 2)
        #expect(try database.liveActivities(orderID: "o-1").count == 1)

        let copy = directory.path + "/backup.sqlite3"
        try database.backup(to: copy)
        #expect(throws: StorageError.self) { try database.backup(to: copy) }
        var backupFile = StorageConfiguration(dataDirectory: directory.path)
        backupFile.fileName = "backup.sqlite3"
        let restored = try Database.open(backupFile)
        #expect(try restored.order(id: "o-1")?.status == .preparing)
        #expect(try restored.integrityCheck() == "ok")
    }
}

@Suite("Checkpoints")
struct CheckpointTests {
    /// Commits leave their pages in the WAL; `checkpoint()` copies every one of them into the file.
    @Test func backgroundCheckpointCopiesTheWAL() throws {
        let directory = try TemporaryDirectory()
        let database = try StoreFixtures.database(directory)
        for index in 0..<30 { _ = try StoreFixtures.seed(database, id: "o-\(index)") }
        let result = try database.checkpoint()
        #expect(result.walPages > 0)
        #expect(result.checkpointedPages == result.walPages)
        #expect(try database.integrityCheck() == "ok")
    }
}

@Suite("Priority budget")
struct PriorityBudgetTests {
    /// Only accepted priority-10 pushes of that activity within the window count against its budget,
    /// as the push worker reads it (`pushBatchContext`) after recording attempts (`completePushes`).
    @Test(arguments: StoreBackend.all)
    func countsAcceptedHighPriorityPushes(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database, activities: 2)
        let t = StoreFixtures.t0
        let registrations = try database.claimDue(owner: "w", now: t, lease: 30, limit: 10)
        let row = try #require(registrations.first { $0.target == .activity(activityID: "act-0") })
        let attempts: [(String, Int, Int?, TimeInterval)] = [
            ("act-0", 10, 200, 0), ("act-0", 10, 200, 1800), ("act-0", 5, 200, 1900), ("act-0", 10, 429, 2000),
            ("act-0", 10, nil, 2100), ("act-1", 10, 200, 2200), ("act-0", 10, 200, -600),
        ]
        for (target, priority, status, offset) in attempts {
            let attempt = PushAttempt(
                orderID: "o-1", targetID: target, event: "update", priority: priority, httpStatus: status,
                reason: nil, apnsID: nil, latencyMilliseconds: 1, attemptedAt: t.addingTimeInterval(offset))
            try database.markSent(row, now: t, attempt: attempt)
        }
        func budgetUse(_ activityID: String, since: Date) throws -> Int? {
            let item = OutboxItem(
                id: 0, orderID: "o-1", eventID: nil, target: .activity(activityID: activityID), attempts: 0, dueAt: t,
                createdAt: t, requestID: nil)
            return try database.pushBatchContext(for: [item], highPrioritySince: since).highPriorityPushes[
                ActivityKey(orderID: "o-1", activityID: activityID)]
        }
        #expect(try budgetUse("act-0", since: t) == 2)
        #expect(try budgetUse("act-0", since: t.addingTimeInterval(-3600)) == 3)
        #expect(try budgetUse("act-1", since: t) == 1)

        // The caller names the activities it needs counted (those a priority-10 push may go to);
        // the others are not read, and the predicate sees each activity with its order.
        let both = ["act-0", "act-1"].map { activityID in
            OutboxItem(
                id: 0, orderID: "o-1", eventID: nil, target: .activity(activityID: activityID), attempts: 0, dueAt: t,
                createdAt: t, requestID: nil)
        }
        var asked: [String] = []
        let context = try database.pushBatchContext(
            for: both, highPrioritySince: t,
            countingFor: { order, activity in
                asked.append("\(order.id)/\(activity.activityID)")
                return activity.activityID == "act-1"
            })
        #expect(asked.sorted() == ["o-1/act-0", "o-1/act-1"])
        #expect(context.highPriorityPushes == [ActivityKey(orderID: "o-1", activityID: "act-1"): 1])
        #expect(context.activities.count == 2)
    }
}

@Suite("A pushed batch, a few statements per kind")
struct PushBatchStatementTests {
    /// Groups for `IN` lists are powers of two filled with their last value; groups for inserts are
    /// exact; both keep every value, in order, and never exceed the largest group.
    @Test func groupsArePowersOfTwoAndKeepEveryValue() {
        for count in [1, 2, 3, 7, 63, 64, 65, 70, 129, 500] {
            let values = Array(0..<count)
            let padded = StoreSQL.paddedGroups(values)
            #expect(padded.allSatisfy { $0.count <= StoreSQL.largestGroup && $0.count.nonzeroBitCount == 1 })
            #expect(padded.flatMap { Array(Set($0)).sorted() } == values, "count \(count)")
            let exact = StoreSQL.exactGroups(values)
            #expect(exact.allSatisfy { $0.count <= StoreSQL.largestGroup && $0.count.nonzeroBitCount == 1 })
            #expect(exact.flatMap { $0 } == values, "count \(count)")
        }
        #expect(StoreSQL.exactGroups(Array(0..<70)).map(\.count) == [64, 4, 2])
        #expect(StoreSQL.paddedGroups(Array(0..<70)).map(\.count) == [64, 8])
        #expect(StoreSQL.paddedGroups([Int]()).isEmpty && StoreSQL.exactGroups([Int]()).isEmpty)
    }

    /// More rows than one statement takes: every row's order, activity and budget is read, and every
    /// outcome written (its log row, its outbox row, what its activity shows), none twice, none lost.
    @Test(arguments: StoreBackend.all)
    func aBatchLargerThanAGroupIsReadAndWrittenWhole(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let store = try backend.open(place.path)
        let t = StoreFixtures.t0
        let orders = try (0..<70).map { try StoreFixtures.newOrder(id: "o-\($0)", number: "N-\($0)") }
        try store.bulkInsert(orders, activitiesPerOrder: 2, now: t)
        let claimed = try store.claimDue(owner: "w", now: t, lease: 30, limit: 500)
        #expect(claimed.count == 140)

        let before = try store.pushBatchContext(for: claimed, highPrioritySince: t.addingTimeInterval(-3600))
        #expect(Set(before.orders.keys) == Set(orders.map(\.0.id)))
        #expect(before.orders.values.allSatisfy { $0.items.isEmpty && $0.status == .placed })
        #expect(before.activities.count == 140 && before.highPriorityPushes.count == 140)
        #expect(before.highPriorityPushes.values.allSatisfy { $0 == 0 })

        // Every tenth row is retried later; the rest were accepted at priority 10.
        let retried = Set(claimed.indices.filter { $0 % 10 == 0 }.map { claimed[$0].id })
        let completions = claimed.map { item -> PushCompletion in
            guard !retried.contains(item.id) else {
                return PushCompletion(item: item, outcome: .retry(at: t.addingTimeInterval(60), error: "later"))
            }
            guard case .activity(let activityID) = item.target else {
                return PushCompletion(item: item, outcome: .sent)
            }
            let attempt = PushAttempt(
                orderID: item.orderID, targetID: activityID, event: "update", priority: 10, httpStatus: 200,
                reason: nil, apnsID: "apns-\(item.id)", latencyMilliseconds: 3, attemptedAt: t)
            return PushCompletion(
                item: item, outcome: .sent, attempt: attempt,
                sentState: .init(status: .placed, fingerprint: "f-\(item.id)", timestamp: t.addingTimeInterval(1)))
        }
        let removed = try store.completePushes(completions, now: t)
        #expect(removed == Array(repeating: false, count: 140))

        let after = try store.pushBatchContext(for: claimed, highPrioritySince: t.addingTimeInterval(-3600))
        for item in claimed {
            guard case .activity(let activityID) = item.target else { continue }
            let key = ActivityKey(orderID: item.orderID, activityID: activityID)
            let sent = !retried.contains(item.id)
            #expect(after.highPriorityPushes[key] == (sent ? 1 : 0), "\(key)")
            #expect(after.activities[key]?.shown?.fingerprint == (sent ? "f-\(item.id)" : nil), "\(key)")
        }
        let logged = try orders.flatMap { try store.pushLog(orderID: $0.0.id) }
        #expect(logged.count == 140 - retried.count)
        #expect(Set(logged.compactMap(\.apnsID)).count == logged.count, "each attempt logged once")
        #expect(try store.claimDue(owner: "w2", now: t.addingTimeInterval(59), lease: 30, limit: 500).isEmpty)
        let due = try store.claimDue(owner: "w2", now: t.addingTimeInterval(61), lease: 30, limit: 500)
        #expect(Set(due.map(\.id)) == retried)
    }

    /// One activity twice in a batch: it shows what the later completion says, as written row by row.
    @Test(arguments: StoreBackend.all)
    func theLaterOfTwoCompletionsOfAnActivityWins(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let store = try backend.open(place.path)
        let t = StoreFixtures.t0
        _ = try StoreFixtures.seed(store, activities: 1)
        let item = try #require(try store.claimDue(owner: "w", now: t, lease: 30, limit: 10).first)
        let completions = ["first", "second"].enumerated().map { index, fingerprint in
            PushCompletion(
                item: item, outcome: .sent,
                sentState: .init(
                    status: .placed, fingerprint: fingerprint, timestamp: t.addingTimeInterval(Double(index))))
        }
        try store.completePushes(completions, now: t)
        let shown = try #require(try store.activity(orderID: "o-1", activityID: "act-0")?.shown)
        #expect(shown.fingerprint == "second")
        #expect(shown.timestamp == t.addingTimeInterval(1))
    }
}
