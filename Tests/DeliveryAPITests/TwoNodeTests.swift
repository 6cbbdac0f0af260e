import Cryptography
import DeliveryAPI
import DeliveryActivityContract
import Foundation
import HTTPServer
import OrderDomain
import Storage
import Synchronization
import TestSupport
import Testing

/// Two services on one database, as two nodes would run: what must hold does not rest on memory
/// that only one process has.
@Suite("Two nodes on one database")
struct TwoNodeTests {
    /// One `Idempotency-Key` sent 12 times at once, half to each node: the change runs once, every
    /// answer is the first one (all `applied`, all but one replayed), and the history has one event.
    /// (Each node used to keep its own set of keys in flight: the other node ran the change again and
    /// answered `unchanged`, and a second request on one node got `409`.)
    @Test func anIdempotencyKeyRunsOnceAcrossNodes() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let sealingKey = SealingKey.generate()
        let fixedNow = api.now
        let nodes = try (0..<2).map { _ in
            let store = try TestStore.open(api.directory)
            let router = DeliveryService(
                store: store, configuration: DeliveryServiceConfiguration(defaultBundleID: "com.example.app"),
                sealingKey: sealingKey, clock: { fixedNow }
            ).router()
            return try APIHarness(router: router, store: store, directory: api.directory)
        }
        // A third store holds the write lock while the requests arrive, so that they meet at the lock
        // however fast the machine is; any that comes after its release reads the kept answer.
        let holder = try TestStore.open(api.directory)
        let (locked, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let holding = Thread {
            _ = try? holder.write { _ in
                locked.signal()
                release.wait()
            }
        }
        holding.start()
        locked.wait()
        let replies = ConcurrentReplies()
        let finished = DispatchGroup()
        for index in 0..<12 {
            finished.enter()
            Thread {
                let reply = try? nodes[index % 2].send(
                    "POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "preparing"],
                    headers: [("Idempotency-Key", "prep-1")])
                replies.append(reply)
                finished.leave()
            }.start()
        }
        usleep(300_000)
        release.signal()
        finished.wait()
        let all = replies.all
        #expect(all.count == 12)
        #expect(all.allSatisfy { $0?.status == 200 && $0?.json["transition"] as? String == "applied" })
        #expect(all.filter { $0?.header("Idempotent-Replayed") == nil }.count == 1, "the change ran once")
        #expect(try api.store.events(orderID: order.id).map(\.to.rawValue) == ["placed", "preparing"])
    }

    /// A refusal holds no key: after `409 illegal_transition` the same key runs the corrected request.
    @Test func aRefusalReleasesTheKey() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let key = [("Idempotency-Key", "cancel-1")]
        #expect(
            try api.send("POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "pickup"]).status
                == 200)
        let refused = try api.send(
            "POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "preparing"], headers: key)
        #expect(refused.status == 409 && refused.errorCode == "illegal_transition")
        let wrongBodyNowFine = try api.send(
            "POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "cancelled"], headers: key)
        #expect(wrongBodyNowFine.status == 200 && wrongBodyNowFine.header("Idempotent-Replayed") == nil)
    }

    /// Live activities per order: 20 registrations at once through two stores on one file, with a
    /// limit of 10, leave exactly 10 live and refuse the rest.
    @Test func theActivityCapHoldsAcrossStores() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let stores = try (0..<2).map { _ in try TestStore.open(api.directory) }
        let outcomes = ConcurrentOutcomes()
        DispatchQueue.concurrentPerform(iterations: 20) { index in
            do {
                _ = try stores[index % 2].registerActivity(
                    orderID: order.id, activityID: "a-\(index)", pushToken: String(repeating: "ab", count: 32),
                    environment: .production, bundleID: "com.example.app", shown: nil, liveLimit: 10, now: Date(),
                    requestID: nil)
                outcomes.append("registered")
            } catch {
                outcomes.append((error as? StorageError)?.code == .limitReached ? "limit" : "\(error)")
            }
        }
        #expect(outcomes.all.filter { $0 == "registered" }.count == 10)
        #expect(outcomes.all.filter { $0 == "limit" }.count == 10)
        #expect(try api.store.liveActivities(orderID: order.id).count == 10)
    }

    /// Push-to-start devices per customer: 20 devices registered at once through two stores, with a
    /// limit of 10, leave exactly 10 and refuse the rest (the customer has no row to lock: the rule
    /// holds by a lock of its own on PostgreSQL).
    @Test func theDeviceCapHoldsAcrossStores() throws {
        let api = try APIHarness()
        let stores = try (0..<2).map { _ in try TestStore.open(api.directory) }
        let outcomes = ConcurrentOutcomes()
        DispatchQueue.concurrentPerform(iterations: 20) { index in
            do {
                try stores[index % 2].registerPushToStart(
                    DeviceKey(merchantID: "m-1", customerID: "c-1", deviceID: "d-\(index)"), credentialID: "cred",
                    pushToken: String(format: "%064x", index), environment: .production, bundleID: "com.example.app",
                    deviceLimit: 10, now: Date())
                outcomes.append("registered")
            } catch {
                outcomes.append((error as? StorageError)?.code == .limitReached ? "limit" : "\(error)")
            }
        }
        #expect(outcomes.all.filter { $0 == "registered" }.count == 10)
        #expect(outcomes.all.filter { $0 == "limit" }.count == 10, "\(outcomes.all)")
    }

    /// Two pushers claiming through two stores at once never hold one row, nor two rows of one
    /// activity, at the same time.
    @Test func outboxClaimsDoNotOverlapAcrossStores() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        var orders: [String] = []
        for number in 0..<20 {
            let order = try api.createOrder(merchant, number: "A-\(number)")
            for activity in ["a", "b"] {
                _ = try api.store.registerActivity(
                    orderID: order.id, activityID: activity, pushToken: String(repeating: "cd", count: 32),
                    environment: .production, bundleID: "com.example.app", shown: nil, now: api.now, requestID: nil)
            }
            orders.append(order.id)
        }
        for id in orders {
            #expect(
                try api.send("POST", "/v1/orders/\(id)/status", as: merchant, json: ["status": "preparing"]).status
                    == 200)
        }
        let stores = try (0..<2).map { _ in try TestStore.open(api.directory) }
        let claims = ConcurrentOutcomes()
        let now = api.now.addingTimeInterval(1)
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            for _ in 0..<10 {
                let items =
                    (try? stores[worker].claimDue(owner: "worker-\(worker)", now: now, lease: 600, limit: 7)) ?? []
                for item in items { claims.append("\(item.id) \(item.orderID) \(item.target)") }
            }
        }
        let claimed = claims.all
        #expect(!claimed.isEmpty)
        #expect(Set(claimed).count == claimed.count, "a row was claimed twice")
        let targets = claimed.map { $0.split(separator: " ").dropFirst().joined(separator: " ") }
        #expect(Set(targets).count == targets.count, "two rows of one activity were held at once")
    }
}

/// Answers collected from concurrent callers.
final class ConcurrentReplies: Sendable {
    private let replies = Mutex<[APIHarness.Reply?]>([])
    func append(_ reply: APIHarness.Reply?) { replies.withLock { $0.append(reply) } }
    var all: [APIHarness.Reply?] { replies.withLock { $0 } }
}

/// Outcomes collected from concurrent callers.
final class ConcurrentOutcomes: Sendable {
    private let outcomes = Mutex<[String]>([])
    func append(_ outcome: String) { outcomes.withLock { $0.append(outcome) } }
    var all: [String] { outcomes.withLock { $0 } }
}
