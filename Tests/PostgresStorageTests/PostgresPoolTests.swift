import Foundation
import PostgresStorage
import Storage
import Synchronization
import TestScheduling
import TestSupport
import Testing

/// The pool and the migrator against real PostgreSQL servers.
@Suite("PostgreSQL pool and migrations", .serialized, .heavy)
struct PostgresPoolTests {
    /// At most `size` connections: a caller past them waits, gets `busy` when none comes free in
    /// time, and is served once one is given back.
    @Test func thePoolIsBounded() throws {
        let server = try PostgresServer()
        var configuration = PostgresPool.Configuration(url: server.url)
        configuration.size = 2
        configuration.acquireTimeout = 0.3
        let pool = PostgresPool(configuration)
        let (held, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let holders = DispatchGroup()
        for _ in 0..<2 {
            holders.enter()
            Thread {
                _ = try? pool.withConnection { connection in
                    held.signal()
                    release.wait()
                }
                holders.leave()
            }.start()
        }
        held.wait()
        held.wait()
        #expect(pool.health.open == 2 && pool.health.idle == 0)
        #expect(throws: StorageError(.busy, "")) { try pool.withConnection { _ in } }
        release.signal()
        release.signal()
        holders.wait()
        #expect(try pool.withConnection { try $0.query("SELECT 1 AS one").first?.int("one") } == 1)
        #expect(pool.health.open == 2 && pool.health.idle == 2)
    }

    /// A server that goes away: callers get `unavailable` within the connect timeout, never a hang;
    /// once it is back the pool reconnects by itself.
    @Test func aRestartedServerIsReachedAgain() throws {
        let server = try PostgresServer()
        var configuration = PostgresPool.Configuration(url: server.url)
        configuration.connectTimeout = 2
        configuration.maximumBackoff = 0.5
        let pool = PostgresPool(configuration)
        #expect(try pool.withConnection { try $0.query("SELECT 1 AS one").first?.int("one") } == 1)
        try server.stop()
        for _ in 0..<3 {
            #expect(throws: StorageError(.unavailable, "")) {
                try pool.withConnection { try $0.query("SELECT 1 AS one") }
            }
        }
        #expect(pool.health.reachable == false)
        try server.start()
        var answered: Int64?
        for _ in 0..<100 where answered == nil {
            answered = try? pool.withConnection { try $0.query("SELECT 1 AS one").first?.int("one") }
            if answered == nil { usleep(100_000) }
        }
        #expect(answered == 1, "the pool never reached the restarted server")
        #expect(pool.health.reachable)
    }

    /// The schema is applied once, by whichever of several starting nodes gets the lock first; the
    /// others find it done. A database newer than the binary is refused.
    @Test func migrationsRunOnceAcrossStartingNodes() throws {
        let server = try PostgresServer()
        let migrations = try PostgresMigrator.bundled()
        #expect(migrations.map(\.version) == Array(1...PostgresMigrator.codeVersion))
        let applied = Mutex<[Int]>([])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let connection = try PostgresConnection.connect(url: server.url)
                let done = try PostgresMigrator.migrate(connection, migrations)
                applied.withLock { $0 += done }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(applied.withLock { $0 } == Array(1...PostgresMigrator.codeVersion), "one node applied the schema")
        let connection = try PostgresConnection.connect(url: server.url)
        let tables = try connection.query(
            "SELECT count(*) AS tables FROM information_schema.tables WHERE table_schema = 'public'")
        #expect(try tables.first?.int("tables") == 15, "fourteen tables and schema_migrations")

        try connection.query(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)")
        do {
            try PostgresMigrator.migrate(connection, migrations)
            Issue.record("a database newer than the binary was accepted")
        } catch {
            #expect(error.message.contains("newer than this binary knows"))
        }
    }

    /// A migration that fails leaves neither its changes nor its record, and frees the lock.
    @Test func aFailedMigrationLeavesNothing() throws {
        let server = try PostgresServer()
        let connection = try PostgresConnection.connect(url: server.url)
        let broken = [
            Migration(version: 1, name: "0001_bad.sql", sql: "CREATE TABLE t (x int); INSERT INTO nowhere VALUES (1);")
        ]
        #expect(throws: StorageError.self) { try PostgresMigrator.migrate(connection, broken) }
        let left = try connection.query(
            "SELECT (SELECT count(*) FROM information_schema.tables WHERE table_name = 't') AS tables, "
                + "(SELECT count(*) FROM schema_migrations) AS applied")
        #expect(try left.first?.int("tables") == 0 && left.first?.int("applied") == 0)
        let other = try PostgresConnection.connect(url: server.url)
        #expect(try other.query("SELECT pg_try_advisory_lock(1) AS free").first?.int("free") == 1)
        #expect(
            try PostgresMigrator.migrate(other, try PostgresMigrator.bundled())
                == Array(1...PostgresMigrator.codeVersion))
    }
}
