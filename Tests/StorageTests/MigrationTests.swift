import Foundation
import Testing

@testable import Storage

@Suite("Migrations")
struct MigrationTests {
    /// From an empty file every shipped migration applies and is recorded; a reopen applies nothing.
    @Test func fromEmptyAndIdempotent() throws {
        let directory = try TemporaryDirectory()
        let configuration = StorageConfiguration(dataDirectory: directory.path)
        let bundled = try Migrator.bundled()
        #expect(bundled.map(\.version) == Array(1...Migrator.codeVersion))
        let connection = try SQLiteConnection.open(configuration)
        #expect(try Migrator.migrate(connection, bundled) == Array(1...Migrator.codeVersion))
        #expect(try Migrator.migrate(connection, bundled) == [])
        let tables = try connection.cached("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .rows([]) { try $0.text("name") }
        for table in [
            "activities", "api_keys", "customer_credentials", "idempotency_keys", "order_events", "orders", "outbox",
            "push_log",
            "push_to_start_tokens", "schema_migrations",
        ] {
            #expect(tables.contains(table), "missing table \(table)")
        }
    }

    /// Migrations that end before (or after) the version the code needs are refused, naming where
    /// they were found: another build's resource folder beside a copied binary.
    @Test func migrationsOfAnotherBuildAreRefused() throws {
        let directory = URL(fileURLWithPath: "/opt/other-build/deliveryd_Storage.resources/Migrations")
        let bundled = try Migrator.bundled()
        #expect(try Migrator.matching(Migrator.codeVersion, bundled, found: directory) == bundled)
        for migrations in [Array(bundled.dropLast()), []] {
            let error = #expect(throws: StorageError.self) {
                try Migrator.matching(Migrator.codeVersion, migrations, found: directory)
            }
            #expect(error?.description.contains("/opt/other-build/deliveryd_Storage.resources") == true)
            #expect(error?.description.contains("needs version \(Migrator.codeVersion)") == true)
        }
    }

    /// A database at each earlier version is brought up to the newest, applying only what is missing.
    @Test func fromEachEarlierVersion() throws {
        let migrations = [
            Migration(version: 1, name: "0001_a.sql", sql: "CREATE TABLE a (x INTEGER);"),
            Migration(version: 2, name: "0002_b.sql", sql: "ALTER TABLE a ADD COLUMN y TEXT;"),
            Migration(version: 3, name: "0003_c.sql", sql: "CREATE INDEX a_y ON a (y);"),
        ]
        for start in 0...3 {
            let directory = try TemporaryDirectory()
            let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
            try Migrator.migrate(connection, Array(migrations.prefix(start)))
            #expect(try Migrator.migrate(connection, migrations) == Array((start + 1)..<4))
            try connection.cached("INSERT INTO a (x, y) VALUES (1, 'ok')").run()
        }
    }

    /// Riders became their merchant's own: a rider key of before keeps its rider when exactly one
    /// merchant ever assigned that rider id, and is left unbound (refused at sign-in) when several did.
    @Test func riderKeysAreBoundToTheirOnlyMerchant() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        let bundled = try Migrator.bundled()
        try Migrator.migrate(connection, bundled.filter { $0.version < 8 })
        for (id, merchant, rider) in [
            ("o-1", "m-1", "r-1"), ("o-2", "m-1", "r-1"), ("o-3", "m-1", "r-2"), ("o-4", "m-2", "r-2"),
        ] {
            try connection.cached(
                """
                INSERT INTO orders (id, merchant_id, number, merchant_name, items_json, customer_id, customer_name,
                    customer_phone, customer_locale, address, payment_method, status, estimated_arrival, rider_id,
                    created_at, updated_at)
                VALUES (?, ?, ?, 'Shop', '[]', 'c-1', 'Ana', '+1', 'en', 'Main St', 'cash', 'placed', 0, ?, 0, 0)
                """
            ).run([.text(id), .text(merchant), .text(id), .text(rider)])
        }
        for (id, role, merchant, rider) in [
            ("k-1", "rider", nil, "r-1"), ("k-2", "rider", nil, "r-2"), ("k-3", "rider", nil, "r-3"),
            ("k-4", "merchant", "m-1", nil),
        ] as [(String, String, String?, String?)] {
            try connection.cached(
                "INSERT INTO api_keys (id, key_hash, role, merchant_id, rider_id, created_at) VALUES (?, ?, ?, ?, ?, 0)"
            ).run([
                .text(id), .text("hash-" + id), .text(role), merchant.map(DatabaseValue.text) ?? .null,
                rider.map(DatabaseValue.text) ?? .null,
            ])
        }
        #expect(try Migrator.migrate(connection, bundled.filter { $0.version <= 8 }) == [8])
        let bound = try connection.cached("SELECT id, merchant_id FROM api_keys ORDER BY id").rows([]) {
            "\(try $0.text("id"))=\(try $0.optionalText("merchant_id") ?? "none")"
        }
        #expect(bound == ["k-1=m-1", "k-2=none", "k-3=none", "k-4=m-1"])
    }

    /// Webhooks read from streams (version 12): what was queued as rows before is sent from its rows,
    /// once, and the endpoint's stream starts after every event already there.
    @Test func queuedWebhooksSurviveTheMoveToStreams() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try Migrator.migrate(connection, try Migrator.bundled().filter { $0.version < 12 })
        try connection.cached(
            """
            INSERT INTO webhook_endpoints (id, merchant_id, url, secret_sealed, created_at, updated_at)
            VALUES ('ep-1', 'm-1', 'https://hooks.example.com', x'01', 0, 0)
            """
        ).run()
        for (event, state) in [("msg_old_1", "delivered"), ("msg_old_2", "pending")] {
            try connection.cached(
                """
                INSERT INTO webhook_events (id, merchant_id, type, created_at, body)
                VALUES (?, 'm-1', 'order.status_changed', 0, x'7b7d')
                """
            ).run([.text(event)])
            try connection.cached(
                """
                INSERT INTO webhook_deliveries (endpoint_id, event_id, state, due_at, created_at, updated_at)
                VALUES ('ep-1', ?, ?, 0, 0, 0)
                """
            ).run([.text(event), .text(state)])
        }
        let store = try StoreFixtures.database(directory)
        func claim() throws -> [WebhookDelivery] {
            try store.claimWebhookDeliveries(
                owner: "n", now: StoreFixtures.t0, lease: 30, limit: 10, perEndpoint: 10, inFlight: [:], streams: [:]
            ).deliveries
        }
        let queued = try claim()
        #expect(queued.map(\.eventID) == ["msg_old_2"] && queued.first?.rowID != nil)
        #expect(try store.webhookQueueCounts(endpointID: "ep-1").delivered == 1)
        _ = try StoreFixtures.seed(store)  // order.status_changed and activity.started, from the stream
        let new = try claim()
        #expect(new.count == 2 && new.allSatisfy { $0.position != nil && !$0.eventID.hasPrefix("msg_old") })
    }

    /// A migration that fails leaves neither its changes nor its record behind.
    @Test func failedMigrationRollsBack() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        let broken = [
            Migration(version: 1, name: "0001_bad.sql", sql: "CREATE TABLE t (x); INSERT INTO nowhere VALUES (1);")
        ]
        #expect(throws: StorageError.self) { try Migrator.migrate(connection, broken) }
        let count = try connection.cached("SELECT count(*) AS tables FROM sqlite_master WHERE name = 't'").firstRow([])
        {
            try $0.int("tables")
        }
        #expect(count == 0)
        #expect(
            try connection.cached("SELECT count(*) AS applied FROM schema_migrations").firstRow([]) {
                try $0.int("applied")
            } == 0)
    }

    /// A file written by a newer binary is refused with a message that says so.
    @Test func newerDatabaseIsRefused() throws {
        let directory = try TemporaryDirectory()
        let configuration = StorageConfiguration(dataDirectory: directory.path)
        _ = try Database.open(configuration)
        let connection = try SQLiteConnection.open(configuration)
        try connection.cached("INSERT INTO schema_migrations VALUES (99, '0099_future.sql', 0)").run()
        do {
            _ = try Database.open(configuration)
            Issue.record("a database from the future was opened")
        } catch {
            #expect(error.description.contains("newer than this binary"))
        }
    }

    /// Duplicate migration numbers are a build error, not a silent skip.
    @Test func duplicateNumbersRefused() {
        #expect(throws: StorageError.self) {
            try Migrator.validated([
                Migration(version: 1, name: "0001_a.sql", sql: ""), Migration(version: 1, name: "0001_b.sql", sql: ""),
            ])
        }
    }
}
