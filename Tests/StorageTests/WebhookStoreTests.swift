import DeliveryActivityContract
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

    /// A merchant without endpoints gets nothing stored (SQLite reads that it has none; PostgreSQL's
    /// insert, sent without waiting, finds none).
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

    /// An endpoint's new events are read from its stream by one sender at a time, past its cursor; the
    /// cursor moves only past finished events, a failed attempt becomes an outbox row retried on its
    /// own, and a sender that stops mid-attempt leaves its unfinished events to the next one.
    @Test(arguments: StoreBackend.all)
    func streamsLeasesRetriesAndReplays(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        _ = try StoreContractTests.seeded(store)  // order.status_changed and activity.started

        func claim(
            _ owner: String, at seconds: Double, perEndpoint: Int = 4, inFlight: [String: Int] = [:],
            streams: [String: WebhookStreamProgress] = [:]
        ) throws -> WebhookClaim {
            try store.claimWebhookDeliveries(
                owner: owner, now: t0.addingTimeInterval(seconds), lease: 30, limit: 10, perEndpoint: perEndpoint,
                inFlight: inFlight, streams: streams)
        }
        /// On PostgreSQL an event is read once every transaction older than it has ended, those of
        /// the other suites' databases on the same server included: a claim may find it a moment later.
        func eventually(_ claiming: () throws -> WebhookClaim) throws -> WebhookClaim {
            let deadline = Date().addingTimeInterval(30)
            while true {
                let claim = try claiming()
                if !claim.deliveries.isEmpty || Date() > deadline { return claim }
                usleep(20_000)
            }
        }
        let first = try eventually { try claim("n-1", at: 0, perEndpoint: 1) }
        #expect(first.deliveries.count == 1, "one per endpoint at a time")
        let statusChanged = try #require(first.deliveries.first)
        #expect(statusChanged.attempts == 0 && statusChanged.rowID == nil)
        #expect(statusChanged.secretSealed == [1, 2, 3])
        #expect(String(decoding: statusChanged.body, as: UTF8.self).hasPrefix(#"{"type":"order.status_changed""#))
        let firstPosition = try #require(statusChanged.position)
        #expect(first.readThrough == ["ep-1": firstPosition])
        #expect(try claim("n-2", at: 0).deliveries.isEmpty, "the stream is n-1's while it reads it")
        // n-1 reads on after what it read, not after the cursor.
        let reading = WebhookStreamProgress(readThrough: firstPosition, finishedThrough: nil, holding: true)
        let second = try eventually { try claim("n-1", at: 0, inFlight: ["ep-1": 1], streams: ["ep-1": reading]) }
        let started = try #require(second.deliveries.first)
        #expect(second.deliveries.count == 1)
        #expect(String(decoding: started.body, as: UTF8.self).hasPrefix(#"{"type":"activity.started""#))
        let secondPosition = try #require(started.position)
        #expect(firstPosition < secondPosition)

        // The first fails: it becomes a row, retried after 5 s; the cursor moves past it.
        _ = try store.exchangeWebhookDeliveries(
            [
                WebhookCompletion(
                    delivery: statusChanged, attemptedAt: t0, httpStatus: 500, error: nil, durationMilliseconds: 12,
                    outcome: .retry(at: t0.addingTimeInterval(5)))
            ], owner: "n-1", now: t0, lease: 30, limit: 0, perEndpoint: 4, inFlight: [:],
            streams: [
                "ep-1": WebhookStreamProgress(
                    readThrough: secondPosition, finishedThrough: firstPosition, holding: true)
            ])
        #expect(try store.webhookEndpoint(id: "ep-1")?.failingSince == t0)
        #expect(try store.webhookQueueCounts(endpointID: "ep-1").pending == 2, "the retry and the unfinished one")
        #expect(
            try claim(
                "n-1", at: 4, inFlight: ["ep-1": 1],
                streams: [
                    "ep-1": WebhookStreamProgress(readThrough: secondPosition, finishedThrough: nil, holding: true)
                ]
            ).deliveries.isEmpty, "not due before its retry, and nothing new")
        // n-1 stopped mid-attempt: its lease, kept by its last round at 4 s, runs out at 34 s. n-2 then
        // takes the retry and reads the stream after the cursor: the unfinished event again.
        let again = try claim("n-2", at: 35)
        #expect(again.deliveries.count == 2)
        let retried = try #require(again.deliveries.first { $0.rowID != nil })
        #expect(retried.eventID == statusChanged.eventID && retried.attempts == 1)
        let resent = try #require(again.deliveries.first { $0.rowID == nil })
        #expect(resent.eventID == started.eventID && resent.position == secondPosition)
        #expect(
            try claim("n-2", at: 35, inFlight: ["ep-1": 4]).deliveries.isEmpty, "no room left for the endpoint")
        let done = t0.addingTimeInterval(36)
        _ = try store.exchangeWebhookDeliveries(
            again.deliveries.map {
                WebhookCompletion(
                    delivery: $0, attemptedAt: done, httpStatus: $0.rowID != nil ? 204 : 410, error: nil,
                    durationMilliseconds: 3, outcome: $0.rowID != nil ? .delivered : .failed,
                    endpointChange: $0.rowID != nil ? .none : .disable(reason: "the receiver answered 410 Gone"))
            }, owner: "n-2", now: done, lease: 30, limit: 0, perEndpoint: 4, inFlight: [:],
            streams: [
                "ep-1": WebhookStreamProgress(
                    readThrough: secondPosition, finishedThrough: secondPosition, holding: false)
            ])
        let endpoint = try #require(try store.webhookEndpoint(id: "ep-1"))
        #expect(!endpoint.enabled)
        #expect(endpoint.disabledReason == "the receiver answered 410 Gone")
        let counts = try store.webhookQueueCounts(endpointID: "ep-1")
        #expect(counts.delivered == 1 && counts.failed == 1 && counts.pending == 0)
        let log = try store.webhookAttempts(endpointID: "ep-1", limit: 10)
        #expect(log.map(\.attempt) == [1, 2, 1] || log.map(\.attempt) == [2, 1, 1])
        #expect(log.last?.httpStatus == 500)
        let delivery = statusChanged

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
        let replayed = try claim("n-1", at: 36).deliveries
        #expect(Set(replayed.map(\.eventID)).count == 2)
        #expect(replayed.allSatisfy { $0.attempts == 0 && $0.rowID != nil }, "replays are rows, not the stream")

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
        var counted = WebhookQueueCounts()
        counted.delivered = 3  // counted on the endpoint, not read from what was pruned
        #expect(try store.webhookQueueCounts(endpointID: "ep-1") == counted)
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

    /// Event ids are `msg_`, the time in 12 hex digits and 64 random bits in 16: they sort by time
    /// and two events never share one.
    @Test(arguments: StoreBackend.all)
    func eventIDsSortByTimeAndAreUnique(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        let (order, event) = try StoreFixtures.newOrder()
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: t0)
        for (step, status) in [OrderStatus.preparing, .pickup, .delivering].enumerated() {
            _ = try StoreFixtures.setStatus(store, order.id, status, at: t0.addingTimeInterval(Double(step + 1)))
        }
        let events = try store.webhookEvents(merchantID: "m-1", limit: 10).reversed()
        #expect(events.count == 4)
        for event in events {
            #expect(event.id.count == 32 && event.id.hasPrefix("msg_"))
            #expect(event.id.dropFirst(4).allSatisfy { "0123456789abcdef".contains($0) })
            #expect(
                Int64(event.id.dropFirst(4).prefix(12), radix: 16)
                    == Int64((event.createdAt.timeIntervalSince1970 * 1000).rounded()))
        }
        #expect(events.map(\.id) == events.map(\.id).sorted())
        #expect(Set(events.map { $0.id.suffix(16) }).count == 4)
    }

    /// The delivery log is pruned in the order it was written, up to its first attempt still kept:
    /// no attempt goes before its time; one logged after a newer one (a node whose clock is behind)
    /// waits for a later pass.
    @Test(arguments: StoreBackend.all)
    func theDeliveryLogIsPrunedInTheOrderItWasWritten(backend: StoreBackend) throws {
        let place = Place()
        let store = try backend.open(place.path)
        try store.createWebhookEndpoint(Self.endpoint("ep-1"))
        _ = try StoreContractTests.seeded(store)
        // On PostgreSQL an event is read once every older transaction has ended, other suites' too.
        var claimed: [WebhookDelivery] = []
        let deadline = Date().addingTimeInterval(30)
        while claimed.isEmpty && Date() < deadline {
            claimed = try store.claimWebhookDeliveries(
                owner: "n-1", now: t0, lease: 30, limit: 10, perEndpoint: 4, inFlight: [:], streams: [:]
            ).deliveries
            if claimed.isEmpty { usleep(20_000) }
        }
        let delivery = try #require(claimed.first)
        let days: [Double] = [1, 2, 40, 3, 41]
        try store.completeWebhookDeliveries(
            days.map {
                WebhookCompletion(
                    delivery: delivery, attemptedAt: t0.addingTimeInterval($0 * 86_400), httpStatus: 200, error: nil,
                    durationMilliseconds: 1, outcome: .delivered)
            }, now: t0)
        // Kept 30 days: on day 35 the attempts of days 1, 2 and 3 are due; the one of day 3 waits.
        let report = try store.prune(now: t0.addingTimeInterval(35 * 86_400), policy: RetentionPolicy())
        #expect(report.webhookAttempts == 2)
        let kept = try store.webhookAttempts(endpointID: "ep-1", limit: 10).map(\.attemptedAt)
        #expect(kept == [41, 3, 40].map { t0.addingTimeInterval($0 * 86_400) }, "newest first")
        let later = try store.prune(now: t0.addingTimeInterval(75 * 86_400), policy: RetentionPolicy())
        #expect(later.webhookAttempts == 3)
        #expect(try store.webhookAttempts(endpointID: "ep-1", limit: 10).isEmpty)
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
