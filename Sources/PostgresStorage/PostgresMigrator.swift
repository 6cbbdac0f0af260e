internal import Foundation
package import Storage

/// Brings a PostgreSQL database to this binary's schema, once, however many nodes start together.
///
/// The migrations run under a session advisory lock, so a second node starting at the same moment
/// waits for the first and then finds nothing left to do; each migration commits with its record in
/// `schema_migrations`, and a database at a version this binary does not know is refused (a newer
/// deliveryd wrote it: running older code on it could corrupt what the newer one expects).
package enum PostgresMigrator {
    /// The advisory lock's key: any constant the operator's other applications will not use.
    static let lockKey: Int64 = 0x6465_6C69_7665_7279  // "delivery"

    /// The schema version this code reads and writes: the last migration of its folder.
    package static let codeVersion = 9

    /// The migrations shipped with this binary (`Sources/PostgresStorage/Migrations`).
    package static func bundled() throws(StorageError) -> [Migration] {
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw StorageError("the PostgreSQL migrations are missing from the build (resource folder Migrations)")
        }
        return try Migrator.matching(codeVersion, Migrator.load(from: directory), found: directory)
    }

    /// Applies what is missing; returns the versions applied by this call.
    /// - Throws: `StorageError` when the database is newer than `migrations`, or a migration fails
    ///   (it leaves nothing behind; the lock is released either way).
    @discardableResult
    package static func migrate(_ connection: PostgresConnection, _ migrations: [Migration]) throws(StorageError)
        -> [Int]
    {
        try connection.query("SELECT pg_advisory_lock($1)", [.integer(lockKey)])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1)", [.integer(lockKey)]) }
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)
            """)
        var applied: Set<Int64> = []
        let rows = try connection.query("SELECT version FROM schema_migrations")
        for index in 0..<rows.count { applied.insert(try rows[index].int("version")) }
        let newest = Int64(migrations.map(\.version).max() ?? 0)
        if let unknown = applied.max(), unknown > newest {
            throw StorageError(
                "the database is at schema version \(unknown), newer than this binary knows (\(newest)); "
                    + "run a newer deliveryd or restore a backup")
        }
        var done: [Int] = []
        for migration in migrations where !applied.contains(Int64(migration.version)) {
            try connection.execute("BEGIN")
            do {
                try connection.execute(migration.sql)
                try connection.query(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    [
                        .integer(Int64(migration.version)), .text(migration.name),
                        .integer(Int64(Date().timeIntervalSince1970 * 1000)),
                    ])
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw StorageError(
                    error.code, "migration \(migration.name) failed: \(error.message)", underlying: error.underlying)
            }
            done.append(migration.version)
        }
        return done
    }
}
