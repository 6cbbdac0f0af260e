internal import Foundation
package import Storage

/// Copies a SQLite data directory into an empty PostgreSQL database: every order with its history,
/// activities, push-to-start devices, credentials, API keys, idempotent replies, the pushes still
/// queued and the push log, with their ids, so that a deployment moves to several nodes without
/// losing an activity in flight.
///
/// Both schemas are brought to this binary's version first; the columns copied are PostgreSQL's,
/// read by name from SQLite, so a column one side lacks stops the copy instead of dropping data.
/// Everything is written in one transaction: a copy that fails leaves the database empty.
package enum SQLiteToPostgres {
    /// The tables in the order their references allow.
    static let tables = [
        "api_keys", "customer_credentials", "orders", "order_events", "activities", "push_to_start_tokens",
        "outbox", "push_log", "idempotency_keys", "webhook_endpoints", "webhook_events", "webhook_deliveries",
        "webhook_attempts",
    ]

    /// - Returns: rows copied per table, in copy order.
    /// - Throws: `StorageError` when the PostgreSQL database holds any row already (nothing is copied
    ///   then), or when either side cannot be read or written.
    package static func copy(dataDirectory: String, to url: String) throws(StorageError) -> [(table: String, rows: Int)]
    {
        let configuration = StorageConfiguration(dataDirectory: dataDirectory)
        guard FileManager.default.fileExists(atPath: configuration.databasePath) else {
            throw StorageError("no SQLite database at \(configuration.databasePath)")
        }
        _ = try Database.open(configuration, readerCount: 1)  // brings an older file to this version
        _ = try PostgresStore.open(url: url, poolSize: 1)  // and the PostgreSQL schema
        let source: SQLiteConnection
        do {
            source = try SQLiteConnection.open(configuration, readOnly: true)
        } catch {
            throw StorageError(error, context: "cannot read \(configuration.databasePath)")
        }
        let target = try PostgresConnection.connect(url: url)
        for table in tables {
            let present = try target.query("SELECT count(*) AS rows FROM \(table)").first?.int("rows") ?? 0
            guard present == 0 else {
                throw StorageError(
                    "the PostgreSQL database is not empty (\(present) rows in \(table)); copy into an empty one")
            }
        }
        try target.execute("BEGIN")
        do {
            var copied: [(table: String, rows: Int)] = []
            for table in tables {
                copied.append((table, try copyTable(table, from: source, to: target)))
            }
            for table in ["order_events", "outbox", "push_log", "webhook_deliveries", "webhook_attempts"] {
                try target.query(
                    "SELECT setval(pg_get_serial_sequence($1, 'id'), max(id)) FROM \(table) HAVING max(id) IS NOT NULL",
                    [.text(table)])
            }
            // Events made after the copy are numbered after every copied one.
            try target.query(
                "SELECT setval('webhook_event_seq', max(seq)) FROM webhook_events HAVING max(seq) IS NOT NULL")
            try target.execute("COMMIT")
            // The copy's statistics now, not at autovacuum's next round: until then the nodes would
            // plan for empty tables and keep those plans (a sequential scan of every copied row
            // where a primary key finds one).
            try target.execute("ANALYZE")
            return copied
        } catch {
            if target.isOpen { try? target.execute("ROLLBACK") }
            throw StorageError(error, context: "the copy failed and was undone")
        }
    }

    private static func copyTable(_ table: String, from source: SQLiteConnection, to target: PostgresConnection)
        throws -> Int
    {
        let columns = try target.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position",
            [.text(table)]
        ).map { try $0.text("column_name") }
        let list = columns.joined(separator: ", ")
        let placeholders = columns.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
        let insert = "INSERT INTO \(table) (\(list)) OVERRIDING SYSTEM VALUE VALUES (\(placeholders))"
        let rows = try source.cached("SELECT \(list) FROM \(table)").rows([]) { row in
            try columns.map { column throws(StorageError) in try row[column] }
        }
        for values in rows { try target.query(insert, values) }
        return rows.count
    }
}
