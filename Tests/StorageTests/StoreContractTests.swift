import DeliveryActivityContract
import Foundation
import OrderDomain
import PostgresStorage
import Storage
import Synchronization
import TestSupport
import Testing

/// A backend the contract runs against: how to open a fresh store, and a second handle on the same
/// data (another node).
struct StoreBackend: Sendable, CustomTestStringConvertible {
    let name: String
    /// Whether a status change's `StoredChange` counts its pushes and names their event (SQLite),
    /// or queues them without waiting to learn either (PostgreSQL).
    let countsQueuedPushes: Bool
    let open: @Sendable (_ place: String) throws -> any DeliveryStore

    var testDescription: String { name }

    /// What a status change that queued `count` pushes reports of them on this backend.
    func reported(_ count: Int) -> Int? { countsQueuedPushes ? count : nil }

    static let all: [StoreBackend] = [
        StoreBackend(name: "SQLite", countsQueuedPushes: true) { place in
            try Database.open(StorageConfiguration(dataDirectory: place))
        },
        StoreBackend(name: "PostgreSQL", countsQueuedPushes: false) { place in try TestStore.postgres(place) },
    ]
}

/// What every backend of `DeliveryStore` must do, written against the interface alone.
@Suite("Store contract")
struct StoreContractTests {
    /// A fresh place for a backend's data, removed with the value.
    final class Place {
        let path = NSTemporaryDirectory() + "store-contract-" + UUID().uuidString
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static func seeded(_ store: any DeliveryStore) throws -> Order {
        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0, requestID: "r-1")
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a", pushToken: "t", environment: .production, bundleID: "b",
            shown: nil, liveLimit: 10, now: StoreFixtures.t0, requestID: nil)
        return order
    }

    /// The write path as the API runs it: the order read locked, the domain's outcome recorded (row,
    /// event, one push per live activity carrying the event and request), all visible after commit.
    @Test(arguments: StoreBackend.all)
    func recordsAnAppliedChange(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        let (order, event) = try StoreFixtures.newOrder()
        guard
            case .created(_, let creationEvent, _) = try store.createOrder(
                order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0, requestID: "r-1")
        else {
            Issue.record("the order was not created")
            return
        }
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a", pushToken: "t", environment: .production, bundleID: "b",
            shown: nil, liveLimit: 10, now: StoreFixtures.t0, requestID: nil)
        _ = try store.claimDue(owner: "w", now: StoreFixtures.t0, lease: 1, limit: 10)  // the registration's push
        let stored = try store.write { transaction in
            let current = try #require(try transaction.lockOrder(id: order.id))
            #expect(current == order, "the locked order is the stored one, private fields included")
            let outcome = try current.applying(
                StatusChange(status: .preparing), by: .merchant(id: "m-1"), at: StoreFixtures.t0)
            return try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: "r-2")
        }
        #expect(stored.queuedPushes == backend.reported(1))
        #expect(try store.order(id: order.id)?.status == .preparing)
        #expect(try store.events(orderID: order.id).map(\.to) == [.placed, .preparing])
        let claimed = try store.claimDue(
            owner: "w", now: StoreFixtures.t0.addingTimeInterval(2), lease: 30, limit: 5)
        #expect(claimed.map(\.target) == [.activity(activityID: "a")])
        // The push names the change's event, after the creation's; `record` returns it where it counts.
        let newest = try StoreFixtures.newestEventID(store, order.id)
        #expect(claimed.first?.eventID == newest)
        #expect((newest ?? 0) > creationEvent)
        #expect(stored.eventID == (backend.countsQueuedPushes ? newest : nil))
        #expect(claimed.first?.requestID == "r-2")
    }

    /// A claimed batch comes with its planning read, made in the claim's transaction: the same as a
    /// read of its own right after, the activities counted only where the caller asks.
    @Test(arguments: StoreBackend.all)
    func aClaimedBatchComesWithItsPlanningRead(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        let first = try StoreFixtures.seed(store, id: "o-1", activities: 2)
        let second = try StoreFixtures.seed(store, id: "o-2", activities: 1)
        // The registrations' pushes go out, one of them at priority 10: a budget to count.
        let registered = try store.claimDue(owner: "w", now: StoreFixtures.t0, lease: 30, limit: 10)
        #expect(registered.count == 3)
        for item in registered {
            let counted = item.orderID == "o-1" && item.target == .activity(activityID: "act-0")
            try store.markSent(
                item, now: StoreFixtures.t0,
                attempt: PushAttempt(
                    orderID: item.orderID, targetID: "act-\(counted ? 0 : 1)", event: "update",
                    priority: counted ? 10 : 5, httpStatus: 200, reason: nil, apnsID: nil, latencyMilliseconds: 2,
                    attemptedAt: StoreFixtures.t0))
        }
        _ = try StoreFixtures.setStatus(store, first.id, .preparing)
        _ = try StoreFixtures.setStatus(store, second.id, .preparing)

        let onlyTheFirstOrder: (Order, ActivityRecord) -> Bool = { order, _ in order.id == "o-1" }
        let since = StoreFixtures.t0.addingTimeInterval(-3600)
        let batch = try store.claimBatch(
            owner: "w", now: StoreFixtures.t0.addingTimeInterval(1), lease: 30, limit: 10, highPrioritySince: since,
            countingFor: onlyTheFirstOrder)
        #expect(batch.items.map(\.orderID).sorted() == ["o-1", "o-1", "o-2"])
        let alone = try store.pushBatchContext(
            for: batch.items, highPrioritySince: since, countingFor: onlyTheFirstOrder)
        #expect(batch.context.orders == alone.orders)
        #expect(batch.context.orders["o-1"]?.status == .preparing, "the claim reads the change that queued it")
        #expect(batch.context.activities == alone.activities)
        #expect(batch.context.activities.count == 3)
        #expect(batch.context.highPriorityPushes == alone.highPriorityPushes)
        #expect(
            batch.context.highPriorityPushes == [
                ActivityKey(orderID: "o-1", activityID: "act-0"): 1,
                ActivityKey(orderID: "o-1", activityID: "act-1"): 0,
            ])
        // The rows are claimed: a second claim finds nothing, and its batch reads nothing.
        let empty = try store.claimBatch(
            owner: "w2", now: StoreFixtures.t0.addingTimeInterval(2), lease: 30, limit: 10, highPrioritySince: since,
            countingFor: onlyTheFirstOrder)
        #expect(empty.items.isEmpty && empty.context.orders.isEmpty)
    }

    /// The pusher reads an order as pushes show it: every field the projection uses as stored, and
    /// none of the personal data no push carries (name, phone, address, payment, note, items).
    @Test(arguments: StoreBackend.all)
    func aBatchReadsNoPersonalData(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        _ = try StoreFixtures.seed(store, id: "o-1", activities: 1)
        _ = try StoreFixtures.setStatus(store, "o-1", .preparing)
        let stored = try #require(try store.order(id: "o-1"))
        let batch = try store.claimBatch(
            owner: "w", now: StoreFixtures.t0.addingTimeInterval(1), lease: 30, limit: 10,
            highPrioritySince: StoreFixtures.t0, countingFor: { _, _ in false })
        let read = try #require(batch.context.orders["o-1"])
        #expect(
            [read.id, read.merchantID, read.number, read.merchantName, read.customer.id, read.customer.locale]
                == [stored.id, stored.merchantID, stored.number, stored.merchantName, stored.customer.id, "de-DE"])
        #expect(read.status == .preparing && read.cancelledAt == stored.cancelledAt && read.rider == stored.rider)
        #expect(read.estimatedArrival == stored.estimatedArrival && read.createdAt == stored.createdAt)
        #expect(read.updatedAt == stored.updatedAt && read.tracking == stored.tracking)
        #expect(stored.customer.phone == "+49 30 1234567" && stored.address == "Hauptstr. 1" && stored.note != nil)
        #expect(read.customer.name.isEmpty && read.customer.phone.isEmpty && read.address.isEmpty)
        #expect(read.payment.method.isEmpty && read.payment.last4 == nil && read.note == nil && read.items.isEmpty)
    }

    /// A body that throws leaves nothing, and its error comes back as it is: a domain refusal after
    /// writes were made is an `OrderError`, not a storage failure.
    @Test(arguments: StoreBackend.all)
    func aRefusalWritesNothingAndComesBackUnwrapped(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        let order = try Self.seeded(store)
        let depth = try store.outboxDepth().count
        #expect(throws: OrderError(.illegalTransition, "")) {
            try store.write { transaction in
                let current = try #require(try transaction.lockOrder(id: order.id))
                let outcome = try current.applying(StatusChange(status: .pickup), by: .admin, at: StoreFixtures.t0)
                _ = try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: nil)
                throw OrderError(.illegalTransition, "refused after writing")
            }
        }
        #expect(try store.order(id: order.id)?.status == .placed)
        #expect(try store.events(orderID: order.id).count == 1)
        #expect(try store.outboxDepth().count == depth)
    }

    /// `unchanged` writes nothing; a missing order reads as `nil`.
    @Test(arguments: StoreBackend.all)
    func unchangedWritesNothing(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        let order = try Self.seeded(store)
        let depth = try store.outboxDepth().count
        let stored = try store.write { transaction in
            let current = try #require(try transaction.lockOrder(id: order.id))
            let outcome = try current.applying(StatusChange(status: .placed), by: .admin, at: StoreFixtures.t0)
            return try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: nil)
        }
        #expect(stored.eventID == nil && stored.queuedPushes == 0)
        #expect(try store.events(orderID: order.id).count == 1)
        #expect(try store.outboxDepth().count == depth)
        #expect(try store.write { try $0.lockOrder(id: "missing") } == nil)
    }

    /// Concurrent changes of one order through two handles on the same data serialize on the lock:
    /// 40 ETA changes, each deciding on the order it locked, leave 40 events and the last ETA.
    @Test(arguments: StoreBackend.all)
    func changesOfOneOrderSerializeAcrossHandles(backend: StoreBackend) throws {
        let place = Place()
        let stores = [try backend.open(place.path), try backend.open(place.path)]
        let order = try Self.seeded(stores[0])
        DispatchQueue.concurrentPerform(iterations: 40) { index in
            _ = try? stores[index % 2].write { transaction in
                let current = try #require(try transaction.lockOrder(id: order.id))
                let later = current.estimatedArrival.addingTimeInterval(60)
                let outcome = try current.changingEstimatedArrival(to: later, by: .admin, at: StoreFixtures.t0)
                return try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: nil)
            }
        }
        #expect(try stores[1].events(orderID: order.id).count == 41)
        #expect(try stores[1].order(id: order.id)?.estimatedArrival == order.estimatedArrival.addingTimeInterval(2400))
    }

    /// The write that blocks no thread: 48 tasks change one order's ETA at once and each gets its
    /// own committed outcome; a body that throws comes back unwrapped and leaves nothing.
    @Test(arguments: StoreBackend.all)
    func asyncWritesCommitAndRefuseLikeTheOthers(backend: StoreBackend) async throws {
        let place = Place()
        let store = try backend.open(place.path)
        let order = try Self.seeded(store)
        let eventIDs = try await withThrowingTaskGroup(of: Int64?.self) { group in
            for _ in 0..<48 {
                group.addTask {
                    try store.write { transaction in
                        let current = try #require(try transaction.lockOrder(id: order.id))
                        let later = current.estimatedArrival.addingTimeInterval(60)
                        let outcome = try current.changingEstimatedArrival(to: later, by: .admin, at: StoreFixtures.t0)
                        return try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: nil)
                            .eventID
                    }
                }
            }
            return try await group.reduce(into: Set<Int64>()) { ids, id in if let id { ids.insert(id) } }
        }
        // Every write its own event (PostgreSQL does not return their ids: `countsQueuedPushes`).
        #expect(eventIDs.count == (backend.countsQueuedPushes ? 48 : 0))
        #expect(try store.events(orderID: order.id).count == 49)
        #expect(try store.order(id: order.id)?.estimatedArrival == order.estimatedArrival.addingTimeInterval(48 * 60))

        await #expect(throws: OrderError(.illegalTransition, "")) {
            try await store.write { transaction in
                let current = try #require(try transaction.lockOrder(id: order.id))
                let outcome = try current.applying(StatusChange(status: .preparing), by: .admin, at: StoreFixtures.t0)
                _ = try transaction.record(outcome, of: current, now: StoreFixtures.t0, requestID: nil)
                throw OrderError(.illegalTransition, "refused after writing")
            }
        }
        #expect(try store.order(id: order.id)?.status == .placed)
        #expect(try store.events(orderID: order.id).count == 49)
    }

    /// An order number is taken once, by the database's unique key: twelve creates of one number
    /// through two handles store one order, and the others get it back as `existing`.
    @Test(arguments: StoreBackend.all)
    func oneOrderPerNumberAcrossHandles(backend: StoreBackend) throws {
        let place = Place()
        let stores = [try backend.open(place.path), try backend.open(place.path)]
        let created = Mutex(0)
        let existing = Mutex<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 12) { index in
            guard let (order, event) = try? StoreFixtures.newOrder(id: "o-\(index)") else { return }
            switch try? stores[index % 2].createOrder(
                order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0)
            {
            case .created?: created.withLock { $0 += 1 }
            case .existing(let stored)?: _ = existing.withLock { $0.insert(stored.id) }
            case nil: break
            }
        }
        #expect(created.withLock { $0 } == 1)
        #expect(existing.withLock { $0 }.count == 1, "the eleven others all see the one stored order")
        #expect(try stores[1].orderCountsByStatus()[.placed] == 1)
    }

    /// An idempotency key is claimed in the write that uses it: the claim commits with the answer, a
    /// second claim (through another handle) sees that answer, and a body that throws frees the key.
    @Test(arguments: StoreBackend.all)
    func idempotencyKeysAreClaimedWithTheirWrite(backend: StoreBackend) throws {
        let place = Place()
        let stores = [try backend.open(place.path), try backend.open(place.path)]
        let expires = StoreFixtures.t0.addingTimeInterval(3600)
        func claim(_ store: any DeliveryStore, _ key: String) throws -> IdempotencyClaim {
            try store.write { transaction in
                try transaction.claimIdempotencyKey(
                    principal: "p", key: key, requestHash: "h", expiresAt: expires, now: StoreFixtures.t0)
            }
        }
        #expect(throws: OrderError(.illegalTransition, "")) {
            try stores[0].write { transaction in
                _ = try transaction.claimIdempotencyKey(
                    principal: "p", key: "k", requestHash: "h", expiresAt: expires, now: StoreFixtures.t0)
                throw OrderError(.illegalTransition, "refused")
            }
        }
        let answer = IdempotentResponse(requestHash: "h", status: 201, body: Array("sealed".utf8))
        try stores[0].write { transaction in
            #expect(
                try transaction.claimIdempotencyKey(
                    principal: "p", key: "k", requestHash: "h", expiresAt: expires, now: StoreFixtures.t0) == .claimed)
            try transaction.saveIdempotentResponse(principal: "p", key: "k", response: answer)
        }
        #expect(try claim(stores[1], "k") == .taken(answer))
        #expect(try stores[1].idempotentResponse(principal: "p", key: "k", now: StoreFixtures.t0) == answer)
    }

    /// An Android device is kept with its platform, and the start that reached it makes it an
    /// activity of the order, showing what the start showed, with one update queued behind it (a
    /// change committed while the start was on the wire queued nothing for it); written twice, the
    /// activity is made once.
    @Test(arguments: StoreBackend.all)
    func anAndroidStartBecomesAnActivity(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        let device = DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "pixel")
        try store.registerPushToStart(
            device, credentialID: "dc-1", pushToken: "fcm:Token_1", environment: .production, bundleID: "project-1",
            platform: .android, now: StoreFixtures.t0)
        #expect(try store.pushToStart(device)?.platform == .android)
        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0)
        let start = try #require(try store.claimDue(owner: "w", now: StoreFixtures.t0, lease: 30, limit: 10).first)
        #expect(start.target == .start(customerID: "c-42", deviceID: "pixel"))
        let sent = ShownState(status: .placed, fingerprint: "f-1", timestamp: StoreFixtures.t0)
        let completion = PushCompletion(
            item: start, outcome: .sent,
            attempt: PushAttempt(
                orderID: order.id, targetID: "start:pixel", event: "start", priority: 10, httpStatus: 200, reason: nil,
                apnsID: "projects/project-1/messages/1", latencyMilliseconds: 3, attemptedAt: StoreFixtures.t0,
                platform: .android),
            sentState: sent,
            startedDevice: (activityID: "android:pixel", pushToken: "fcm:Token_1", project: "project-1"))
        try store.completePushes([completion], now: StoreFixtures.t0)
        try store.completePushes([completion], now: StoreFixtures.t0.addingTimeInterval(1))

        let activity = try #require(try store.activity(orderID: order.id, activityID: "android:pixel"))
        #expect(
            activity.platform == .android && activity.pushToken == "fcm:Token_1" && activity.bundleID == "project-1")
        #expect(activity.shown?.status == .placed && activity.shown?.fingerprint == "f-1")
        #expect(activity.shown?.timestamp == StoreFixtures.t0)
        let queued = try store.claimDue(owner: "w", now: StoreFixtures.t0.addingTimeInterval(2), lease: 30, limit: 10)
        #expect(queued.map(\.target) == [.activity(activityID: "android:pixel")])
        // The pusher reads when the phone was last sent a message, whichever order it was for.
        let context = try store.pushBatchContext(for: queued, highPrioritySince: StoreFixtures.t0)
        #expect(context.lastSentToToken == ["fcm:Token_1": StoreFixtures.t0])
        #expect(try store.pushLog(orderID: order.id).map(\.platform) == [.android, .android])
    }
}
