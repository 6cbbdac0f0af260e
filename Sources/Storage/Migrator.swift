package import Foundation

/// One numbered schema change, as a file `db/NNNN_description.sql`.
package struct Migration: Sendable, Hashable {
    package let version: Int
    package let name: String
    package let sql: String

    package init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies migrations in order, each in its own transaction, and records them in `schema_migrations`.
package enum Migrator {
    /// The schema version this code reads and writes: the last migration of its folder.
    package static let codeVersion = 15

    /// The migrations shipped with this binary (the `db/` folder, copied as a resource).
    package static func bundled() throws(StorageError) -> [Migration] {
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw StorageError("the migrations are missing from the build (resource folder Migrations)")
        }
        return try matching(codeVersion, load(from: directory), found: directory)
    }

    /// `migrations` when they end at `version`. A resource folder is looked up beside the binary
    /// first: a binary copied next to another build's folder would find that build's migrations,
    /// start, and fail on the first query of a column they lack; it stops at once instead.
    package static func matching(_ version: Int, _ migrations: [Migration], found directory: URL) throws(StorageError)
        -> [Migration]
    {
        guard let last = migrations.last?.version, last == version else {
            throw StorageError(
                "the migrations at \(directory.path) end at version \(migrations.last?.version ?? 0), and this "
                    + "build's code needs version \(version): they are another build's; install the binary with "
                    + "the resource folders built beside it")
        }
        return migrations
    }

    /// The `NNNN_description.sql` files of `directory`, in order (each backend ships its own folder).
    package static func load(from directory: URL) throws(StorageError) -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw StorageError("cannot list migrations in \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for name in names where name.hasSuffix(".sql") {
            guard let version = Int(name.prefix { $0.isNumber }), name.first?.isNumber == true else {
                throw StorageError("migration file \(name) does not start with its number (NNNN_description.sql)")
            }
            let sql: String
            do {
                sql = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            } catch {
                throw StorageError("cannot read migration \(name): \(error.localizedDescription)")
            }
            migrations.append(Migration(version: version, name: name, sql: sql))
        }
        return try validated(migrations)
    }

    /// Sorts migrations and refuses duplicate numbers.
    package static func validated(_ migrations: [Migration]) throws(StorageError) -> [Migration] {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw StorageError("two migrations have number \(next.version): \(previous.name) and \(next.name)")
        }
        return sorted
    }

    /// Brings the database to the newest version; returns the versions it applied.
    ///
    /// - Throws: `StorageError` if the database was written by a newer binary (it has a version this
    ///   binary does not know), or a migration fails; a failed migration leaves no trace.
    @discardableResult
    package static func migrate(_ connection: SQLiteConnection, _ migrations: [Migration]) throws(StorageError) -> [Int]
    {
        do {
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)
                """
            )
            let applied = Set(
                try connection.cached("SELECT version FROM schema_migrations").rows { try $0.int("version") })
            let known = Set(migrations.map { Int64($0.version) })
            if let unknown = applied.subtracting(known).max(), unknown > (known.max() ?? 0) {
                throw StorageError(
                    "the database is at schema version \(unknown), newer than this binary knows "
                        + "(\(known.max() ?? 0)); run a newer deliveryd or restore a backup"
                )
            }
            var done: [Int] = []
            for migration in migrations where !applied.contains(Int64(migration.version)) {
                try connection.transaction {
                    try connection.execute(migration.sql)
                    try connection.cached("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)")
                        .run([
                            .integer(Int64(migration.version)), .text(migration.name),
                            .integer(Int64(Date().timeIntervalSince1970 * 1000)),
                        ])
                }
                done.append(migration.version)
            }
            return done
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError("migration failed: \(error)")
        }
    }
}
