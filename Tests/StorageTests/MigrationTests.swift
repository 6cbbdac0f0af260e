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
        #expect(bundled.map(\.version) == [1, 2, 3, 4, 5, 6, 7])
        let connection = try SQLiteConnection.open(configuration)
        #expect(try Migrator.migrate(connection, bundled) == [1, 2, 3, 4, 5, 6, 7])
        #expect(try Migrator.migrate(connection, bundled) == [])
        let tables = try connection.cached("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .rows([]) { $0.text(0) ?? "" }
        for table in [
            "activities", "api_keys", "customer_credentials", "idempotency_keys", "order_events", "orders", "outbox",
            "push_log",
            "push_to_start_tokens", "schema_migrations",
        ] {
            #expect(tables.contains(table), "missing table \(table)")
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

    /// A migration that fails leaves neither its changes nor its record behind.
    @Test func failedMigrationRollsBack() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        let broken = [
            Migration(version: 1, name: "0001_bad.sql", sql: "CREATE TABLE t (x); INSERT INTO nowhere VALUES (1);")
        ]
        #expect(throws: StorageError.self) { try Migrator.migrate(connection, broken) }
        let count = try connection.cached("SELECT count(*) FROM sqlite_master WHERE name = 't'").firstRow([]) {
            $0.int(0)
        }
        #expect(count == 0)
        #expect(try connection.cached("SELECT count(*) FROM schema_migrations").firstRow([]) { $0.int(0) } == 0)
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
