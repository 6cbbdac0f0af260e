import Cryptography
import Foundation
import OrderDomain
import Pusher
import Storage
import TestSupport
import Testing

/// Stores a placed order of customer c-1 with an ETA 30 minutes after `now`.
func createOrder(in store: Database, id: String, number: String, at now: Date) throws {
    let draft = OrderDraft(
        number: number, merchantName: "Pizza Roma", items: [.init(name: "Tea", quantity: 1, price: 2)],
        customer: .init(id: "c-1", name: "Ana", phone: "+49 30 1234567", locale: "en"), address: "Somewhere 1",
        payment: .init(method: "cash", brand: nil, last4: nil), estimatedArrival: now.addingTimeInterval(1800),
        note: nil
    )
    let (order, event) = try draft.validated(id: id, merchantID: "m-1", by: .admin, at: now)
    _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: now)
}

@Suite("Push worker: outbox to APNs simulator", .serialized)
struct PushWorkerTests {
    /// A status change reaches the live activity as one update; a token APNs reports unregistered is
    /// removed; `delivered` ends the activity, and its token is gone afterwards; every attempt is logged.
    @Test func outboxDrainsIntoSimulator() async throws {
        let directory = NSTemporaryDirectory() + "push-worker-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["dead-token": ["status": 410, "reason": "Unregistered", "timestamp": 4_102_444_800_000]])

        let now = Date()
        try createOrder(in: store, id: "o-1", number: "A-1", at: now)
        for (activity, token) in [("live", "live-token"), ("dead", "dead-token")] {
            _ = try store.registerActivity(
                orderID: "o-1", activityID: activity, pushToken: token, environment: .development,
                bundleID: "com.example.app", now: now
            )
        }
        func set(_ status: OrderStatus) throws {
            _ = try store.change(orderID: "o-1", now: Date()) { current throws(OrderError) in
                try current.applying(StatusChange(status: status), by: .admin, at: Date())
            }
        }
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(developmentURL: simulator.baseURL, productionURL: simulator.baseURL)
        )

        try set(.delivering)
        #expect(try await worker.runOnce(now: Date()) == 2)
        #expect(try await worker.runOnce(now: Date()) == 0)
        #expect(try store.activity(orderID: "o-1", activityID: "dead")?.endedReason == "Unregistered")
        #expect(try store.activity(orderID: "o-1", activityID: "live")?.lastSentStatus == .delivering)

        try set(.delivered)
        #expect(try await worker.runOnce(now: Date()) == 1)
        let live = try #require(try store.activity(orderID: "o-1", activityID: "live"))
        #expect(live.endedReason == "ended" && live.pushToken.isEmpty)

        let records = try simulator.records()
        #expect(records.count == 3)
        #expect(records.filter { ($0["token"] as? String) == "dead-token" }.count == 1)
        let livePayloads = records.filter { ($0["token"] as? String) == "live-token" }.compactMap {
            $0["payload"] as? String
        }
        #expect(livePayloads.count == 2)
        #expect(livePayloads[0].contains(#""event":"update""#) && livePayloads[0].contains(#""status":"delivering""#))
        #expect(livePayloads[1].contains(#""event":"end""#) && livePayloads[1].contains(#""status":"delivered""#))
        #expect(!records.contains { ($0["payload"] as? String)?.contains("+49") == true })
        let log = try store.pushLog(orderID: "o-1")
        #expect(log.compactMap(\.httpStatus).sorted() == [200, 200, 410])
        #expect(log.first { $0.httpStatus == 410 }?.reason == "Unregistered")
        #expect(try store.outboxDepth().count == 0)
    }
}

@Suite("Log sender")
struct LogSenderTests {
    /// Without APNs credentials pushes drain through the log sender, marked as not delivered in the
    /// push log, with one log line per push that carries no full token.
    @Test func drainsAndMarksNotDelivered() async throws {
        let directory = NSTemporaryDirectory() + "log-sender-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let now = Date()
        try createOrder(in: store, id: "o-2", number: "A-2", at: now)
        _ = try store.registerActivity(
            orderID: "o-2", activityID: "a", pushToken: "0123456789abcdef0123", environment: .production,
            bundleID: "com.example.app", now: now
        )
        _ = try store.change(orderID: "o-2", now: now) { current throws(OrderError) in
            try current.applying(StatusChange(status: .pickup), by: .admin, at: now)
        }
        final class Lines {
            var values: [String] = []
        }
        let lines = Lines()
        let worker = PushWorker(
            store: store, sender: LogSender { lines.values.append($0) }, tokens: nil,
            configuration: PusherConfiguration()
        )
        #expect(try await worker.runOnce(now: Date()) == 1)
        #expect(try store.outboxDepth().count == 0)
        #expect(try store.pushLog(orderID: "o-2").map(\.reason) == ["not_delivered_log_sender"])
        #expect(lines.values.count == 1)
        #expect(lines.values[0].contains(#""message":"push.not_delivered""#))
        #expect(lines.values[0].contains("01234567") && !lines.values[0].contains("0123456789abcdef0123"))
    }
}

@Suite("Coalescing through the worker", .serialized)
struct CoalescingTests {
    /// 100 ETA changes queued while nothing is sent become one push carrying the last state.
    @Test func backlogDrainsAsOnePush() async throws {
        let directory = NSTemporaryDirectory() + "coalesce-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let now = Date()
        try createOrder(in: store, id: "o-3", number: "A-3", at: now)
        _ = try store.registerActivity(
            orderID: "o-3", activityID: "a", pushToken: "coalesced-token", environment: .development,
            bundleID: "com.example.app", now: now
        )
        var lastETA = now
        for step in 1...100 {
            lastETA = now.addingTimeInterval(1800 + Double(step) * 60)
            _ = try store.change(orderID: "o-3", now: now) { current throws(OrderError) in
                try current.changingEstimatedArrival(to: lastETA, by: .admin, at: now)
            }
        }
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(developmentURL: simulator.baseURL, productionURL: simulator.baseURL)
        )
        #expect(try await worker.runOnce(now: Date()) == 1)
        let records = try simulator.records()
        try #require(records.count == 1)
        // The projection rounds ETAs to the minute and writes seconds since 2001-01-01.
        let roundedUnix = (lastETA.timeIntervalSince1970 / 60).rounded() * 60
        let expected = Int(roundedUnix - Date.timeIntervalBetween1970AndReferenceDate)
        #expect((records[0]["payload"] as? String)?.contains(#""estimatedArrival":\#(expected)"#) == true)
        #expect(try await worker.runOnce(now: Date()) == 0)
    }
}
