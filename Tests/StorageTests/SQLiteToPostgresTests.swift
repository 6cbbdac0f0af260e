import DeliveryActivityContract
import Foundation
import OrderDomain
import PostgresStorage
import Storage
import TestSupport
import Testing

/// `deliveryd migrate-to-postgres`: a SQLite deployment copied into an empty PostgreSQL database
/// reads back the same, keeps its pushes in flight, goes on numbering where it stopped, and an
/// occupied database is refused.
@Suite("SQLite to PostgreSQL")
struct SQLiteToPostgresTests {
    @Test func aDeploymentMovesWithEverythingInIt() throws {
        let directory = try TemporaryDirectory()
        let sqlite = try StoreFixtures.database(directory)
        let t = StoreFixtures.t0
        try sqlite.createWebhookEndpoint(WebhookStoreTests.endpoint("ep-1"))
        for id in ["o-1", "o-2", "o-3"] { _ = try StoreFixtures.seed(sqlite, id: id, activities: 2) }
        _ = try StoreFixtures.setStatus(sqlite, "o-1", .preparing)
        _ = try StoreFixtures.setStatus(sqlite, "o-2", .cancelled)
        try sqlite.registerPushToStart(
            DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "phone"), credentialID: "cred-1",
            pushToken: "start", environment: .production, bundleID: "b", now: t)
        try sqlite.createAPIKey(
            APIKeyRecord(id: "k-1", keyHash: "kh", role: .merchant, merchantID: "m-1", riderID: nil, createdAt: t))
        try sqlite.createCustomerCredential(
            CustomerCredentialRecord(id: "cred-1", keyHash: "ch", merchantID: "m-1", customerID: "c-42", createdAt: t))
        try sqlite.writing { transaction throws(StorageError) in
            _ = try transaction.claimIdempotencyKey(
                principal: "p", key: "k", requestHash: "h", expiresAt: t.addingTimeInterval(86_400), now: t)
            try transaction.saveIdempotentResponse(
                principal: "p", key: "k",
                response: IdempotentResponse(requestHash: "h", status: 201, body: [0, 1, 255]))
        }
        let sent = try sqlite.claimDue(owner: "w", now: t, lease: 30, limit: 3)
        for item in sent {
            try sqlite.markSent(
                item, now: t,
                attempt: PushAttempt(
                    orderID: item.orderID, targetID: "\(item.target)", event: "update", priority: 10, httpStatus: 200,
                    reason: nil, apnsID: "apns", latencyMilliseconds: 4, attemptedAt: t))
        }

        let url = try TestStore.postgresURL(NSTemporaryDirectory() + "copy-" + UUID().uuidString)
        let copied = try SQLiteToPostgres.copy(dataDirectory: directory.path, to: url)
        #expect(copied.first { $0.table == "orders" }?.rows == 3)
        #expect(copied.first { $0.table == "outbox" }?.rows ?? 0 > 3, "\(copied)")
        let statistics = try PostgresConnection.connect(url: url).query(
            "SELECT reltuples FROM pg_class WHERE relname = 'orders' AND relkind = 'r'")
        #expect(try statistics.first?.double("reltuples") == 3, "the copy is analyzed at once")
        let postgres = try PostgresStore.open(url: url)
        #expect(try Self.readings(of: postgres) == Self.readings(of: sqlite))

        // What was queued is still to send; new rows are numbered after the copied ones.
        let pending = try postgres.claimDue(owner: "w", now: t.addingTimeInterval(60), lease: 30, limit: 100)
        #expect(!pending.isEmpty)
        let stored = try StoreFixtures.setStatus(postgres, "o-3", .preparing)
        #expect(stored.outcome.transitionName == "applied")
        let copiedEvents = try ["o-1", "o-2", "o-3"].flatMap { try sqlite.events(orderID: $0) }.count
        let newest = try PostgresConnection.connect(url: url).query(
            """
            SELECT (SELECT max(id) FROM order_events WHERE order_id = 'o-3') AS event,
                (SELECT max(event_id) FROM outbox WHERE order_id = 'o-3') AS pushed
            """)
        #expect(try newest[0].int("event") > Int64(copiedEvents))
        #expect(try newest[0].int("pushed") == newest[0].int("event"), "the change's push names its event")
        // The endpoint's stream holds the copied webhook events, then the new one.
        let copiedWebhookEvents = Set(try sqlite.webhookEvents(merchantID: "m-1", limit: 500).map(\.id))
        let made = try postgres.webhookEvents(merchantID: "m-1", limit: 500).map(\.id).filter {
            !copiedWebhookEvents.contains($0)
        }
        #expect(made.count == 1)
        var stream: [String] = []
        let deadline = Date().addingTimeInterval(30)  // until the other suites' older transactions end
        while stream.count <= copiedWebhookEvents.count, Date() < deadline {
            stream = try postgres.claimWebhookDeliveries(
                owner: "n", now: t.addingTimeInterval(60), lease: 30, limit: 500, perEndpoint: 500, inFlight: [:],
                streams: [:]
            ).deliveries.map(\.eventID)
            if stream.count <= copiedWebhookEvents.count { usleep(20_000) }
        }
        #expect(Set(stream.dropLast()) == copiedWebhookEvents && stream.count == copiedWebhookEvents.count + 1)
        #expect(stream.last == made.first)

        #expect(throws: StorageError.self) { try SQLiteToPostgres.copy(dataDirectory: directory.path, to: url) }
    }

    /// Everything a deployment holds, as the store reads it.
    static func readings(of store: any DeliveryStore) throws -> [String] {
        var lines: [String] = []
        for id in ["o-1", "o-2", "o-3"] {
            lines.append("\(try store.order(id: id) as Any)")
            lines.append("\(try store.events(orderID: id))")
            lines.append("\(try store.liveActivities(orderID: id))")
            lines.append("\(try store.pushLog(orderID: id))")
        }
        lines.append("\(try store.trackedOrder(trackingTokenHash: "hash-o-2")?.id as Any)")
        lines.append(
            "\(try store.pushToStart(DeviceKey(merchantID: "m-1", customerID: "c-42", deviceID: "phone")) as Any)")
        lines.append("\(try store.apiKeys())")
        lines.append("\(try store.customerCredential(id: "cred-1") as Any)")
        lines.append("\(try store.idempotentResponse(principal: "p", key: "k", now: StoreFixtures.t0) as Any)")
        lines.append("\(try store.outboxDepth())")
        lines.append("\(try store.orderCountsByStatus().sorted { $0.key.rawValue < $1.key.rawValue })")
        return lines
    }
}
