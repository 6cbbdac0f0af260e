import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import TestSupport
import Testing

/// The same script of operations, every one of `DeliveryStore`'s, run on each backend: what each
/// answers must be the same, value for value. SQLite and PostgreSQL differ where the SQL is read
/// differently (comparisons, NULLs, ordering, parameters' types), and this is where that shows.
@Suite("Backend parity")
struct BackendParityTests {
    @Test func everyOperationAnswersAlikeOnEveryBackend() throws {
        let places = StoreBackend.all.map { _ in StoreContractTests.Place() }
        let transcripts = try zip(StoreBackend.all, places).map { backend, place in
            try Self.transcript(of: try backend.open(place.path))
        }
        let reference = try #require(transcripts.first)
        #expect(reference.count > 40, "the script answered too little to compare")
        for (backend, transcript) in zip(StoreBackend.all, transcripts).dropFirst() {
            #expect(transcript.count == reference.count, "\(backend.name) answered a different number of times")
            for (expected, actual) in zip(reference, transcript) where expected != actual {
                Issue.record("\(backend.name) differs from \(StoreBackend.all[0].name):\n  \(actual)\n  \(expected)")
            }
        }
    }

    /// Runs the script and writes down every answer, in order, as text.
    static func transcript(of store: any DeliveryStore) throws -> [String] {
        var lines: [String] = []
        func note(_ label: String, _ value: Any) { lines.append("\(label): \(value)") }
        let t = StoreFixtures.t0
        // Every change below that tells the merchant tells it through this endpoint's events.
        try store.createWebhookEndpoint(WebhookStoreTests.endpoint("ep-parity"))
        let device = DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "phone")
        try store.registerPushToStart(
            device, credentialID: "cred-1", pushToken: "start-token", environment: .production, bundleID: "b",
            deviceLimit: 5, now: t)
        note("push-to-start", try store.pushToStart(device) as Any)

        for (id, customer) in [("o-1", "c-42"), ("o-2", "c-7"), ("o-3", "c-42")] {
            let (order, event) = try StoreFixtures.newOrder(id: id, number: "N-\(id)", customerID: customer)
            note("create \(id)", try store.createOrder(order, event: event, trackingTokenHash: "hash-\(id)", now: t))
        }
        note(
            "create again",
            try store.createOrder(
                try StoreFixtures.newOrder(id: "o-9", number: "N-o-1").0,
                event: try StoreFixtures.newOrder(id: "o-9", number: "N-o-1").1, trackingTokenHash: nil, now: t))
        for index in 0..<2 {
            note(
                "register a-\(index)",
                try store.registerActivity(
                    orderID: "o-1", activityID: "a-\(index)", pushToken: "token-\(index)", environment: .development,
                    bundleID: "b", shown: index == 1 ? ShownState(status: .placed, fingerprint: "f") : nil,
                    liveLimit: 5, now: t.addingTimeInterval(Double(index))))
        }
        // The outcomes (a change's count of pushes is SQLite's alone: `SQLDialect.countsQueuedPushes`).
        note(
            "to preparing", try StoreFixtures.setStatus(store, "o-1", .preparing, at: t.addingTimeInterval(10)).outcome)
        note("cancel o-2", try StoreFixtures.setStatus(store, "o-2", .cancelled, at: t.addingTimeInterval(20)).outcome)
        note("illegal", Self.outcome { try StoreFixtures.setStatus(store, "o-2", .preparing) })
        note(
            "assign o-1",
            try store.change(orderID: "o-1", now: t.addingTimeInterval(25)) { order throws(OrderError) in
                try order.assigning(
                    Rider(id: "r-1", name: "Rita", phone: nil), by: .admin, at: t.addingTimeInterval(25))
            }?.outcome as Any)
        note("outbox after the changes", try store.outboxDepth())
        note(
            "rides",
            try store.recordRides(
                [
                    RideUpdate(
                        orderID: "o-1", riderID: "r-1",
                        tracking: DeliveryTracking(
                            positionAt: t.addingTimeInterval(30), remainingDistance: 1_234.5, initialDistance: 2_000,
                            estimatedArrival: t.addingTimeInterval(600)), queuesPushes: true),
                    RideUpdate(
                        orderID: "o-2", riderID: "r-1",
                        tracking: DeliveryTracking(
                            positionAt: t, remainingDistance: nil, initialDistance: nil, estimatedArrival: nil),
                        queuesPushes: true),
                ], now: t.addingTimeInterval(30)))
        note("order o-1", try store.order(id: "o-1") as Any)
        note("order o-1 without items", try store.order(id: "o-1", includingItems: false) as Any)
        note("by token", try store.trackedOrder(trackingTokenHash: "hash-o-3")?.id as Any)
        note("new token", try store.replaceTrackingToken(orderID: "o-3", hash: "hash-new"))
        note("old token", try store.trackedOrder(trackingTokenHash: "hash-o-3")?.id as Any)
        note("events", try store.events(orderID: "o-1"))
        note("counts", try store.orderCountsByStatus().sorted { $0.key.rawValue < $1.key.rawValue })
        note("oldest", try store.oldestOpenOrders())
        note("matching number", try store.orderIDs(matching: "N-o-1", limit: 5))
        note("matching id", try store.orderIDs(matching: "o-2", limit: 5))
        note("matching case", try store.orderIDs(matching: "n-o-1", limit: 5))
        note("open by merchant", try store.openOrderCountsByMerchant(limit: 5))
        note("open of rider", try store.openOrders(merchantID: "m-1", riderID: "r-1", limit: 5))
        note("depth", try store.outboxDepth())

        let claimed = try store.claimDue(owner: "w", now: t.addingTimeInterval(40), lease: 30, limit: 10)
        note("claimed", claimed)
        note("extended", try store.extendLeases(owner: "w", until: t.addingTimeInterval(100)))
        note("context", try Self.describe(store.pushBatchContext(for: claimed, highPrioritySince: t)))
        var completions: [PushCompletion] = []
        for (index, item) in claimed.enumerated() {
            let attempt = PushAttempt(
                orderID: item.orderID, targetID: "\(item.target)", event: "update", priority: index % 2 == 0 ? 10 : 5,
                httpStatus: index == 1 ? 410 : 200, reason: index == 1 ? "Unregistered" : nil, apnsID: "apns-\(index)",
                latencyMilliseconds: 7, attemptedAt: t.addingTimeInterval(41), requestID: "req",
                contentState: "{\"status\":\"preparing\"}")
            switch index {
            case 0:
                completions.append(
                    PushCompletion(
                        item: item, outcome: .sent, attempt: attempt,
                        sentState: .init(status: .preparing, fingerprint: "fp", timestamp: t.addingTimeInterval(41))))
            case 1:
                completions.append(
                    PushCompletion(
                        item: item, outcome: .dead(reason: "Unregistered"), attempt: attempt,
                        removal: .activity(activityID: "a-1", reason: "Unregistered", onlyIfRegisteredBefore: t)))
            default:
                completions.append(
                    PushCompletion(
                        item: item, outcome: .retry(at: t.addingTimeInterval(60), error: "503"), attempt: nil))
            }
        }
        note("completed", try store.completePushes(completions, now: t.addingTimeInterval(42)))
        note("activity a-0", try store.activity(orderID: "o-1", activityID: "a-0") as Any)
        note("live", try store.liveActivities(orderID: "o-1"))
        note("push log", try store.pushLog(orderID: "o-1"))
        note("failures", try store.recentPushFailures(limit: 5))
        note("dead", try store.deadLetters(limit: 5).map { "\($0)" })
        note("dead count", try store.deadLetterCount())
        note("replayed", try store.replayDeadLetters(ids: nil, now: t.addingTimeInterval(50)))
        note(
            "ended",
            try store.endActivity(
                orderID: "o-1", activityID: "a-0", reason: "user", now: t.addingTimeInterval(51),
                onlyIfRegisteredBefore: nil))

        let key = APIKeyRecord(
            id: "k-1", keyHash: "kh", role: .merchant, merchantID: "m-1", riderID: nil, createdAt: t)
        try store.createAPIKey(key)
        note("duplicate key", Self.outcome { try store.createAPIKey(key) })
        try store.upsertAPIKey(
            APIKeyRecord(id: "k-2", keyHash: "kh2", role: .rider, merchantID: "m-1", riderID: "r-1", createdAt: t))
        note("key", try store.apiKey(id: "k-2") as Any)
        note("keys", try store.apiKeys())
        note("revoked", try store.revokeAPIKey(id: "k-1", now: t.addingTimeInterval(5)))
        note("active riders", try store.activeAPIKeyCount(role: .rider))

        try store.createCustomerCredential(
            CustomerCredentialRecord(id: "cred-1", keyHash: "ch", merchantID: "m-1", customerID: "c-42", createdAt: t))
        note("credential", try store.customerCredential(id: "cred-1") as Any)
        note(
            "credential revoked",
            try store.revokeCustomerCredential(
                id: "cred-1", merchantID: "m-1", customerID: "c-42", now: t.addingTimeInterval(3)))

        note(
            "claim",
            try store.writing { transaction throws(StorageError) in
                try transaction.claimIdempotencyKey(
                    principal: "p", key: "k", requestHash: "h", expiresAt: t.addingTimeInterval(60), now: t)
            })
        try store.writing { transaction throws(StorageError) in
            try transaction.saveIdempotentResponse(
                principal: "p", key: "k",
                response: IdempotentResponse(requestHash: "h", status: 201, body: [1, 0, 255]))
        }
        note("kept answer", try store.idempotentResponse(principal: "p", key: "k", now: t) as Any)
        note(
            "claim again",
            try store.writing { transaction throws(StorageError) in
                try transaction.claimIdempotencyKey(
                    principal: "p", key: "k", requestHash: "h2", expiresAt: t.addingTimeInterval(60), now: t)
            })

        let anHourLater = t.addingTimeInterval(3600)
        note("stalled starts", try store.markStalledStarts(sentBefore: anHourLater, now: anHourLater))
        note("stalled again", try store.markStalledStarts(sentBefore: anHourLater, now: anHourLater))
        note("push log after", try store.pushLog(orderID: "o-1").map(\.reason))
        note(
            "erasure", try store.erasePersonalData(merchantID: "m-1", customerID: "c-42", now: t.addingTimeInterval(70))
        )
        note("erased", try store.order(id: "o-3") as Any)
        // Ids are random and events of one millisecond have no order: compared as a sorted list of bodies.
        note(
            "webhook events",
            try store.webhookEvents(merchantID: "m-1", limit: 100).map { String(decoding: $0.body, as: UTF8.self) }
                .sorted())
        note("webhook queue", try store.webhookQueueCounts(endpointID: "ep-parity"))
        note("removed device", try store.removePushToStart(device, now: t.addingTimeInterval(80)))
        note("prune", try store.prune(now: t.addingTimeInterval(90 * 86_400), policy: RetentionPolicy()))
        note("after prune", try store.order(id: "o-2") as Any)
        return lines
    }

    /// "done", or the error's kind: the engines' messages differ, their codes must not.
    static func outcome(_ body: () throws -> some Any) -> String {
        do {
            _ = try body()
            return "done"
        } catch let error as StorageError {
            return "StorageError \(error.code)"
        } catch {
            return "\(type(of: error)) \(error)"
        }
    }

    /// A push batch's context with its dictionaries in a fixed order.
    static func describe(_ context: PushBatchContext) -> String {
        let orders = context.orders.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let activities = context.activities.sorted { "\($0.key)" < "\($1.key)" }.map { "\($0.value)" }
        let starts = context.pushToStart.sorted { "\($0.key)" < "\($1.key)" }.map { "\($0.value)" }
        let budget = context.highPriorityPushes.sorted { "\($0.key)" < "\($1.key)" }.map { "\($0.key)=\($0.value)" }
        return "\(orders) \(activities) \(starts) \(budget)"
    }
}
