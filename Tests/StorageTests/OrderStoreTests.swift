import DeliveryActivityContract
import Foundation
import OrderDomain
import TestSupport
import Testing

@testable import Storage

@Suite("Orders and the write path")
struct OrderStoreTests {
    /// An order round-trips through the file with every field, private ones included.
    @Test(arguments: StoreBackend.all)
    func orderRoundTrip(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        let (order, event) = try StoreFixtures.newOrder()
        guard
            case .created = try database.createOrder(order, event: event, trackingTokenHash: "h", now: StoreFixtures.t0)
        else {
            Issue.record("expected created")
            return
        }
        #expect(try database.order(id: "o-1") == order)
        #expect(
            try database.trackedOrder(trackingTokenHash: "h")
                == TrackedOrder(id: order.id, status: order.status, updatedAt: order.updatedAt))
        #expect(try database.trackedOrder(trackingTokenHash: "unknown") == nil)
        #expect(try database.events(orderID: "o-1") == [event])
    }

    /// The same merchant and number again returns the stored order and writes nothing new.
    @Test(arguments: StoreBackend.all)
    func duplicateNumberReturnsExisting(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        let (order, event) = try StoreFixtures.newOrder()
        _ = try database.createOrder(order, event: event, trackingTokenHash: "h1", now: StoreFixtures.t0)
        let (again, againEvent) = try StoreFixtures.newOrder(id: "o-2")
        #expect(
            try database.createOrder(again, event: againEvent, trackingTokenHash: "h2", now: StoreFixtures.t0)
                == .existing(order))
        #expect(try database.order(id: "o-2") == nil)
    }

    /// A push-to-start device of the merchant's customer queues one start row when the order is
    /// created; the same customer id's device at another merchant queues nothing.
    @Test(arguments: StoreBackend.all)
    func creationQueuesStart(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        for merchant in ["m-1", "m-2"] {
            try database.registerPushToStart(
                DeviceKey(merchantID: merchant, customerID: "c-42", deviceID: "iphone"), credentialID: "c" + merchant,
                pushToken: "pts-" + merchant, environment: .production, bundleID: "b", now: StoreFixtures.t0
            )
        }
        let (order, event) = try StoreFixtures.newOrder()
        guard
            case .created(_, _, let starts) = try database.createOrder(
                order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0)
        else {
            Issue.record("expected created")
            return
        }
        #expect(starts == 1)
        let claimed = try database.claimDue(owner: "w", now: StoreFixtures.t0, lease: 30, limit: 10)
        #expect(claimed.map(\.target) == [.start(customerID: "c-42", deviceID: "iphone")])
        let context = try database.pushBatchContext(for: claimed, highPrioritySince: StoreFixtures.t0)
        #expect(context.pushToStart.values.map(\.pushToken) == ["pts-m-1"])
    }

    /// A sent update's outbox row leaves the table (its attempt is in the push log); a sent start's
    /// row stays, marked sent, for the check of starts no activity followed.
    @Test(arguments: StoreBackend.all)
    func aSentUpdateLeavesTheOutboxAndASentStartStays(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        let t = StoreFixtures.t0
        try database.registerPushToStart(
            DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "iphone"), credentialID: "c-m-1",
            pushToken: "pts", environment: .production, bundleID: "b", now: t)
        let (order, event) = try StoreFixtures.newOrder()
        _ = try database.createOrder(order, event: event, trackingTokenHash: nil, now: t)
        _ = try database.registerActivity(
            orderID: order.id, activityID: "a", pushToken: "t", environment: .production, bundleID: "b",
            shown: nil, liveLimit: 10, now: t, requestID: nil)
        let claimed = try database.claimDue(owner: "w", now: t, lease: 30, limit: 10)
        #expect(
            Set(claimed.map(\.target)) == [.start(customerID: "c-42", deviceID: "iphone"), .activity(activityID: "a")])
        try database.completePushes(claimed.map { PushCompletion(item: $0, outcome: .sent) }, now: t)

        let store = try #require(database as? any SQLStore)
        let rows = try store.readSession { connection in
            try connection.cached("SELECT kind, state FROM outbox ORDER BY id").rows([]) {
                [try $0.text("kind"), try $0.text("state")]
            }
        }
        #expect(rows == [["start", "sent"]])
        #expect(try database.outboxDepth().count == 0)
    }

    /// One status change writes the order, its event and one outbox row per live activity, in one go.
    @Test(arguments: StoreBackend.all)
    func statusChangeWritesAllOrNothing(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        _ = try StoreFixtures.seed(database, activities: 3)
        try database.endActivity(
            orderID: "o-1", activityID: "act-2", reason: "user", now: StoreFixtures.t0, onlyIfRegisteredBefore: nil)

        let stored = try StoreFixtures.setStatus(database, "o-1", .preparing)
        #expect(stored.outcome.transitionName == "applied")
        #expect(stored.queuedPushes == backend.reported(2))
        #expect(try database.order(id: "o-1")?.status == .preparing)
        #expect(try database.events(orderID: "o-1").last?.to == .preparing)
        #expect(try database.outboxDepth().count == 2)

        let repeated = try StoreFixtures.setStatus(database, "o-1", .preparing)
        #expect(repeated.outcome.transitionName == "unchanged")
        #expect(try database.events(orderID: "o-1").count == 2)
        #expect(try database.outboxDepth().count == 2)

        do {
            _ = try StoreFixtures.setStatus(database, "o-1", .placed)
            Issue.record("a backward move was stored")
        } catch {
            #expect((error as? OrderError)?.code == .illegalTransition, "the domain's refusal, not wrapped")
        }
        #expect(try database.order(id: "o-1")?.status == .preparing)
        #expect(try database.events(orderID: "o-1").count == 2)
    }

    /// A missing order is a fact the store reports (`nil`), and the change is never asked.
    @Test(arguments: StoreBackend.all)
    func missingOrder(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        let stored = try database.change(orderID: "nope", now: StoreFixtures.t0) { _ throws(OrderError) in
            Issue.record("the change ran for a missing order")
            throw OrderError(.notFound, "unreachable")
        }
        #expect(stored == nil)
    }

    /// Readers on other threads see only committed states while a writer keeps committing.
    @Test(arguments: StoreBackend.all)
    func concurrentReadersWithWriter(backend: StoreBackend) async throws {
        let place = StoreContractTests.Place()
        let database = try backend.open(place.path)
        for index in 0..<20 { _ = try StoreFixtures.seed(database, id: "o-\(index)") }
        try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                for status in [OrderStatus.preparing, .pickup, .delivering, .delivered] {
                    for index in 0..<20 { _ = try StoreFixtures.setStatus(database, "o-\(index)", status) }
                }
                return 0
            }
            for _ in 0..<3 {
                group.addTask {
                    var reads = 0
                    for round in 0..<200 {
                        let order = try database.order(id: "o-\(round % 20)")
                        let events = try database.events(orderID: "o-\(round % 20)")
                        // An order never shows a status its history has not reached (read may straddle commits).
                        if let order, let last = try database.events(orderID: order.id).last {
                            #expect(last.to.pathStage! >= order.status.pathStage!)
                        }
                        #expect(!events.isEmpty)
                        reads += 1
                    }
                    return reads
                }
            }
            var total = 0
            for try await reads in group { total += reads }
            #expect(total == 600)
        }
        let counts = try database.orderCountsByStatus()
        #expect(counts == [.delivered: 20])
    }
}

@Suite("DeliveryStore interface")
struct DeliveryStoreTests {
    /// The service's view of storage works through the protocol alone, as another backend would be used.
    @Test(arguments: StoreBackend.all)
    func flowThroughProtocol(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let store = try backend.open(place.path)
        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: StoreFixtures.t0, requestID: "r-1")
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a", pushToken: "t", environment: .production, bundleID: "b",
            shown: nil, liveLimit: 10, now: StoreFixtures.t0, requestID: nil
        )
        let stored = try store.change(orderID: order.id, now: StoreFixtures.t0, requestID: "r-2") {
            current throws(OrderError) in
            try current.applying(StatusChange(status: .preparing), by: .merchant(id: "m-1"), at: StoreFixtures.t0)
        }
        #expect(stored?.queuedPushes == backend.reported(1))
        let claimed = try store.claimDue(owner: "w", now: StoreFixtures.t0, lease: 30, limit: 5)
        #expect(claimed.map(\.target) == [.activity(activityID: "a")])
        let newest = try StoreFixtures.newestEventID(store, order.id)
        #expect(claimed.first?.eventID == newest)
        #expect(stored?.eventID == (backend.countsQueuedPushes ? newest : nil))
        #expect(claimed.first?.requestID == "r-2")
    }
}
