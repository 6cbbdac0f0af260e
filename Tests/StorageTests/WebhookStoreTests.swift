import Foundation
import OrderDomain
import Storage
import TestSupport
import Testing

/// Webhook events are written by the changes that cause them, in the same transaction, and queued
/// for each endpoint that wants them; the outbox hands each delivery to one sender at a time.
@Suite("Webhook store")
struct WebhookStoreTests {
    typealias Place = StoreContractTests.Place
    let t0 = StoreFixtures.t0

    static func endpoint(_ id: String, merchant: String = "m-1", types: [WebhookEventType] = [], enabled: Bool = true)
        -> WebhookEndpointRecord
    {
        WebhookEndpointRecord(
            id: id, merchantID: merchant, url: "https://hooks.example.com/\(id)", description: "", eventTypes: types,
            enabled: enabled, secretSealed: [1, 2, 3], now: StoreFixtures.t0)
    }

    /// The decoded bodies of a merchant's events, oldest first.
    static func events(_ store: any DeliveryStore, merchant: String = "m-1") throws -> [[String: Any]] {
        try store.webhookEvents(merchantID: merchant, limit: 100).reversed().map { event in
            let body = try #require(try JSONSerialization.jsonObject(with: Data(event.body)) as? [String: Any])
            #expect(body["type"] as? String == event.type.rawValue)
            return body
        }
    }

    static func data(_ body: [String: Any]) -> [String: Any] { body["data"] as? [String: Any] ?? [:] }

    @Test(arguments: StoreBackend.all)
    func everyChangeEmitsItsEventInItsTransaction(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-all"))
        try store.createWebhookEndpoint(Self.endpoint("ep-status", types: [.orderStatusChanged]))
        try store.createWebhookEndpoint(Self.endpoint("ep-off", enabled: false))

        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: t0)
        _ = try StoreFixtures.setStatus(store, order.id, .preparing, at: t0.addingTimeInterval(1))
        // The same status again changes nothing, so it tells nothing.
        _ = try StoreFixtures.setStatus(store, order.id, .preparing, at: t0.addingTimeInterval(2))
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a-1", pushToken: "token-1", environment: .production, bundleID: "b",
            shown: nil, now: t0.addingTimeInterval(3))
        // Registering the same activity again (a new token) is not a new start.
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a-1", pushToken: "token-2", environment: .production, bundleID: "b",
            shown: nil, now: t0.addingTimeInterval(4))
        #expect(
            try store.endActivity(
                orderID: order.id, activityID: "a-1", reason: "user", now: t0.addingTimeInterval(5),
                onlyIfRegisteredBefore: nil))
        let device = DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "phone")
        try store.registerPushToStart(
            device, credentialID: "cred-1", pushToken: "start-1", environment: .production, bundleID: "b",
            now: t0.addingTimeInterval(6))
        #expect(try store.removePushToStart(device, now: t0.addingTimeInterval(7)))

        let bodies = try Self.events(store)
        #expect(
            bodies.map { $0["type"] as? String } == [
                "order.status_changed", "order.status_changed", "activity.started", "activity.ended",
                "push_to_start.removed",
            ])
        #expect(Self.data(bodies[0])["previousStatus"] is NSNull)
        #expect(Self.data(bodies[0])["status"] as? String == "placed")
        #expect(Self.data(bodies[0])["orderNumber"] as? String == "A-1001")
        #expect(Self.data(bodies[1])["previousStatus"] as? String == "placed")
        #expect(Self.data(bodies[1])["status"] as? String == "preparing")
        #expect(Self.data(bodies[2])["activityId"] as? String == "a-1")
        #expect(Self.data(bodies[3])["reason"] as? String == "user_dismissed")
        #expect(Self.data(bodies[4])["reason"] as? String == "signed_out")
        #expect(Self.data(bodies[4])["deviceId"] as? String == "phone")
        // What the merchant did not give us, or gave us as private, is in no event.
        let text = try store.webhookEvents(merchantID: "m-1", limit: 100).map {
            String(decoding: $0.body, as: UTF8.self)
        }
        .joined()
        for secret in ["+49 30 1234567", "Hauptstr", "4242", "ring twice", "Ana", "token-1", "start-1"] {
            #expect(!text.contains(secret), "an event carries \(secret)")
        }
        // Each endpoint gets what it subscribed to; a disabled one nothing.
        #expect(try store.webhookQueueCounts(endpointID: "ep-all").pending == 5)
        #expect(try store.webhookQueueCounts(endpointID: "ep-status").pending == 2)
        #expect(try store.webhookQueueCounts(endpointID: "ep-off").pending == 0)
    }

    /// A merchant without endpoints pays one indexed read per change: nothing is stored for it.
    @Test(arguments: StoreBackend.all)
    func merchantsWithoutEndpointsStoreNoEvents(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-other", merchant: "m-2"))
        _ = try StoreContractTests.seeded(store)
        _ = try StoreFixtures.setStatus(store, "o-1", .cancelled, at: t0.addingTimeInterval(1))
        #expect(try store.webhookEvents(merchantID: "m-1", limit: 10).isEmpty)
        #expect(try store.webhookQueueCounts(endpointID: nil) == WebhookQueueCounts())
    }

    /// A delivery goes to one sender at a time; its outcome moves it on (retry, delivered, failed),
    /// a lease that runs out makes it due again, and a replay queues a finished event once more.
    @Test(arguments: StoreBackend.all)
    func outboxLeasesRetriesAndReplays(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        _ = try StoreContractTests.seeded(store)  // order.status_changed and activity.started

        let first = try store.claimWebhookDeliveries(
            owner: "n-1", now: t0, lease: 30, limit: 10, perEndpoint: 1, inFlight: [:])
        #expect(first.count == 1, "one per endpoint at a time")
        #expect(
            try store.claimWebhookDeliveries(owner: "n-2", now: t0, lease: 30, limit: 10, perEndpoint: 4, inFlight: [:])
                .count == 1, "the other delivery, and not the leased one")
        #expect(
            try store.claimWebhookDeliveries(owner: "n-3", now: t0, lease: 30, limit: 10, perEndpoint: 4, inFlight: [:])
                .isEmpty)
        let delivery = try #require(first.first)
        #expect(delivery.attempts == 0)
        #expect(delivery.secretSealed == [1, 2, 3])
        #expect(String(decoding: delivery.body, as: UTF8.self).hasPrefix(#"{"type":"order.status_changed""#))

        try store.completeWebhookDeliveries(
            [
                WebhookCompletion(
                    delivery: delivery, attemptedAt: t0, httpStatus: 500, error: nil, durationMilliseconds: 12,
                    outcome: .retry(at: t0.addingTimeInterval(5)))
            ], now: t0)
        #expect(try store.webhookEndpoint(id: "ep-1")?.failingSince == t0)
        #expect(
            try store.claimWebhookDeliveries(
                owner: "n-1", now: t0.addingTimeInterval(4), lease: 30, limit: 10, perEndpoint: 4, inFlight: [:]
            ).isEmpty, "not due before its retry")
        // The other sender stopped mid-attempt: its lease runs out at 30 s. A claim at 31 s takes the
        // retry and makes the abandoned one due again; the next claim takes that one.
        let again =
            try store.claimWebhookDeliveries(
                owner: "n-1", now: t0.addingTimeInterval(31), lease: 30, limit: 10, perEndpoint: 4, inFlight: [:])
            + store.claimWebhookDeliveries(
                owner: "n-1", now: t0.addingTimeInterval(31), lease: 30, limit: 10, perEndpoint: 4, inFlight: [:])
        #expect(again.count == 2)
        #expect(Set(again.map(\.id)).count == 2)
        let retried = try #require(again.first { $0.id == delivery.id })
        #expect(retried.attempts == 1)
        #expect(
            try store.claimWebhookDeliveries(
                owner: "n-1", now: t0.addingTimeInterval(31), lease: 30, limit: 10, perEndpoint: 4,
                inFlight: ["ep-1": 4]
            ).isEmpty)
        let done = t0.addingTimeInterval(32)
        try store.completeWebhookDeliveries(
            again.map {
                WebhookCompletion(
                    delivery: $0, attemptedAt: done, httpStatus: $0.id == delivery.id ? 204 : 410, error: nil,
                    durationMilliseconds: 3, outcome: $0.id == delivery.id ? .delivered : .failed,
                    endpointChange: $0.id == delivery.id ? .none : .disable(reason: "the receiver answered 410 Gone"))
            }, now: done)
        let endpoint = try #require(try store.webhookEndpoint(id: "ep-1"))
        #expect(!endpoint.enabled)
        #expect(endpoint.disabledReason == "the receiver answered 410 Gone")
        let counts = try store.webhookQueueCounts(endpointID: "ep-1")
        #expect(counts.delivered == 1 && counts.failed == 1 && counts.pending == 0)
        let log = try store.webhookAttempts(endpointID: "ep-1", limit: 10)
        #expect(log.map(\.attempt) == [1, 2, 1] || log.map(\.attempt) == [2, 1, 1])
        #expect(log.last?.httpStatus == 500)

        // Enabled again, the endpoint gets the range replayed, each event once however often asked.
        var enabled = endpoint
        enabled.enabled = true
        enabled.disabledReason = nil
        #expect(try store.updateWebhookEndpoint(enabled))
        let range = WebhookReplay.range(from: t0.addingTimeInterval(-1), to: t0.addingTimeInterval(60))
        // A range longer than the limit stops after a whole millisecond (both events are of t0), where
        // the next replay takes up.
        let firstPart = try store.replayWebhooks(endpointID: "ep-1", range, limit: 1, now: done)
        #expect(firstPart.queued == 2)
        #expect(firstPart.resumeAt.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == 1_796_212_800_001)
        let rest = try store.replayWebhooks(
            endpointID: "ep-1", .range(from: t0.addingTimeInterval(0.001), to: t0.addingTimeInterval(60)), limit: 1,
            now: done)
        #expect(rest == WebhookReplayOutcome(queued: 0, resumeAt: nil))
        #expect(try store.replayWebhooks(endpointID: "ep-1", range, limit: 10, now: done).queued == 0)
        #expect(
            try store.replayWebhooks(endpointID: "ep-1", .event(id: delivery.eventID), limit: 10, now: done).queued == 0
        )
        let replayed = try store.claimWebhookDeliveries(
            owner: "n-1", now: done, lease: 30, limit: 10, perEndpoint: 4, inFlight: [:])
        #expect(Set(replayed.map(\.eventID)).count == 2)
        #expect(replayed.allSatisfy { $0.attempts == 0 })

        // Pruned after the retention: the events, their finished deliveries and the log.
        try store.completeWebhookDeliveries(
            replayed.map {
                WebhookCompletion(
                    delivery: $0, attemptedAt: done, httpStatus: 200, error: nil, durationMilliseconds: 1,
                    outcome: .delivered)
            }, now: done)
        let report = try store.prune(now: t0.addingTimeInterval(31 * 86_400), policy: RetentionPolicy())
        #expect(report.webhookEvents == 2)
        #expect(report.webhookAttempts == 5)
        #expect(try store.webhookEvents(merchantID: "m-1", limit: 10).isEmpty)
        #expect(try store.webhookQueueCounts(endpointID: "ep-1") == WebhookQueueCounts())
    }

    /// Deleting an endpoint takes its queue and log with it; its merchant's events stay for the others.
    @Test(arguments: StoreBackend.all)
    func deletingAnEndpointTakesItsQueue(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        try store.createWebhookEndpoint(Self.endpoint("ep-2"))
        _ = try StoreContractTests.seeded(store)
        #expect(try store.deleteWebhookEndpoint(id: "ep-1"))
        #expect(try !store.deleteWebhookEndpoint(id: "ep-1"))
        #expect(try store.webhookEndpoints(merchantID: "m-1").map(\.id) == ["ep-2"])
        #expect(try store.webhookQueueCounts(endpointID: nil).pending == 2)
    }
}

extension WebhookStoreTests {
    /// What the pusher finds out tells the merchant too: a start nobody registered an activity for
    /// (`activity.start_stalled`), a token APNs refused (`activity.ended` with `token_dead`), a push
    /// given up on (`push.dead_lettered`).
    @Test(arguments: StoreBackend.all)
    func pushOutcomesTellTheMerchant(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        let device = DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "phone")
        try store.registerPushToStart(
            device, credentialID: "cred-1", pushToken: "start-token", environment: .production, bundleID: "b",
            now: t0)
        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: t0)
        _ = try store.registerActivity(
            orderID: order.id, activityID: "a-1", pushToken: "token-1", environment: .production, bundleID: "b",
            shown: nil, now: t0)
        // The second order's start goes out too, but no activity of it ever registers.
        let (unanswered, created) = try StoreFixtures.newOrder(id: "o-2", number: "A-1002")
        _ = try store.createOrder(unanswered, event: created, trackingTokenHash: nil, now: t0)
        let claimed = try store.claimDue(owner: "w", now: t0.addingTimeInterval(1), lease: 30, limit: 10)
        #expect(claimed.count == 3)
        let sentAt = t0.addingTimeInterval(2)
        let completions = claimed.map { item -> PushCompletion in
            switch item.target {
            case .start:
                return PushCompletion(
                    item: item, outcome: .sent,
                    attempt: PushAttempt(
                        orderID: item.orderID, targetID: "start:phone", event: "start", priority: 10, httpStatus: 200,
                        reason: nil, apnsID: "apns-1", latencyMilliseconds: 5, attemptedAt: sentAt, requestID: nil,
                        contentState: nil))
            case .activity(let activityID):
                return PushCompletion(
                    item: item, outcome: .dead(reason: "BadDeviceToken"),
                    attempt: PushAttempt(
                        orderID: item.orderID, targetID: activityID, event: "update", priority: 10, httpStatus: 400,
                        reason: "BadDeviceToken", apnsID: "apns-2", latencyMilliseconds: 5, attemptedAt: sentAt,
                        requestID: nil, contentState: nil),
                    removal: .activity(activityID: activityID, reason: "BadDeviceToken", onlyIfRegisteredBefore: nil))
            }
        }
        _ = try store.completePushes(completions, now: sentAt)
        let anHourLater = t0.addingTimeInterval(3600)
        #expect(try store.markStalledStarts(sentBefore: anHourLater, now: anHourLater).count == 1)

        let bodies = try Self.events(store)
        let types = bodies.compactMap { $0["type"] as? String }
        #expect(types.filter { $0 == "activity.start_stalled" }.count == 1)
        #expect(types.filter { $0 == "push.dead_lettered" }.count == 1)
        let stalled = try #require(bodies.first { $0["type"] as? String == "activity.start_stalled" })
        #expect(Self.data(stalled)["deviceId"] as? String == "phone")
        #expect(Self.data(stalled)["orderId"] as? String == "o-2")
        #expect(Self.data(stalled)["startSentAt"] as? String != nil)
        let ended = try #require(bodies.first { $0["type"] as? String == "activity.ended" })
        #expect(Self.data(ended)["reason"] as? String == "token_dead")
        #expect(Self.data(ended)["apnsReason"] as? String == "BadDeviceToken")
        let dead = try #require(bodies.first { $0["type"] as? String == "push.dead_lettered" })
        #expect(Self.data(dead)["kind"] as? String == "update")
        #expect(Self.data(dead)["reason"] as? String == "BadDeviceToken")
    }

    /// The parity script's changes tell the merchant what they should (BackendParityTests holds both
    /// backends to the same events, body for body).
    @Test func theParityScriptEmitsItsEvents() throws {
        let place = Place()
        let store = try Database.open(StorageConfiguration(dataDirectory: place.path))
        let transcript = try BackendParityTests.transcript(of: store)
        let line = try #require(transcript.first { $0.hasPrefix("webhook events: ") })
            .replacingOccurrences(of: #"\""#, with: #"""#)
        for type in WebhookEventType.allCases where type != .activityStartStalled {
            #expect(line.contains(#"{"type":"\#(type.rawValue)""#), "the script emits no \(type.rawValue)")
        }
        for reason in ["user_dismissed", "erased", "credential_revoked"] {
            #expect(line.contains(#""reason":"\#(reason)""#), "no event with reason \(reason)")
        }
    }
}
