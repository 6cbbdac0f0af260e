/// One connection's SQL, whichever engine runs it: the store's statements are written once against
/// this, with `?` parameters, and SQLite and PostgreSQL run the same text (see `SQLStore`).
///
/// A session belongs to one thread at a time, inside the transaction its store opened.
package protocol SQLSession: AnyObject {
    associatedtype Statement: SQLStatement

    /// The statement for `sql`, prepared once per connection and reused. On PostgreSQL its plan is
    /// made once, without the values: right for a lookup by key, which every value answers the
    /// same way.
    func cached(_ sql: String) throws -> Statement

    /// The statement for `sql` when its best plan depends on its values: a time range over a table
    /// that grows (retention's sweeps), which may select a few rows or most. PostgreSQL plans it
    /// at each call with its values; SQLite's plans do not look at values, so it is `cached`.
    func plannedForValues(_ sql: String) throws -> Statement

    /// Rows the last INSERT, UPDATE or DELETE run with `run` changed (a `send`'s count is checked by
    /// its `expected` instead: on PostgreSQL it is not known yet).
    var changes: Int { get }

    /// What the engines spell differently.
    var dialect: SQLDialect { get }

    /// Runs a write whose outcome the caller does not read. PostgreSQL sends it with the statements
    /// that follow and reads its result with theirs, at the transaction's next read or its commit
    /// (one round trip for several); SQLite runs it at once. Its failure, or `expected` changes not
    /// met, is thrown there: the transaction fails either way.
    func send(_ sql: String, _ values: [DatabaseValue], expected: ExpectedChanges?) throws

    /// Orders its batch read and locked before the batch's writes ran, for `lockOrder` to hand out;
    /// `nil` where writes are not batched so (SQLite reads in process, without a wait to save).
    var lockedOrderReads: LockedOrderReads? { get }
}

/// The rows a sent write must change, and the error if it does not.
package struct ExpectedChanges: Sendable {
    package let rows: Int
    package let error: StorageError

    package init(rows: Int, else error: StorageError) {
        self.rows = rows
        self.error = error
    }
}

extension SQLSession {
    package func plannedForValues(_ sql: String) throws -> Statement { try cached(sql) }

    package var lockedOrderReads: LockedOrderReads? { nil }

    package func send(_ sql: String, _ values: [DatabaseValue], expected: ExpectedChanges?) throws {
        try cached(sql).run(values)
        if let expected, changes != expected.rows { throw expected.error }
    }

    package func send(_ sql: String, _ values: [DatabaseValue]) throws {
        try send(sql, values, expected: nil)
    }
}

/// A prepared statement of a `SQLSession`.
package protocol SQLStatement {
    /// Runs a statement that returns no rows.
    func run(_ values: [DatabaseValue]) throws
    /// Runs a query and maps each row (valid only inside `transform`).
    func rows<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> [T]
    /// Runs a query and maps its first row, if any.
    func firstRow<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> T?
}

/// The few clauses the store's SQL needs that SQLite and PostgreSQL write differently.
package struct SQLDialect: Sendable {
    /// Appended to a `SELECT` whose rows the transaction goes on to change. SQLite has one writer
    /// and needs none; PostgreSQL's nodes write beside each other and take the rows' locks.
    package let lockingRows: String
    /// Appended to the `SELECT` that picks outbox rows to claim, so that nodes claiming at once take
    /// different rows instead of waiting for each other's.
    package let skippingLockedRows: String
    /// A statement that takes a lock named by its one text parameter until the transaction ends, for
    /// a rule over rows that have no row of their own to lock; `nil` where writes never overlap.
    package let lockingKey: String?
    /// Whether the engine places a webhook event in its stream itself (PostgreSQL: the writing
    /// transaction's id and a sequence, as column defaults); SQLite's store numbers a merchant's
    /// events after its last.
    package let placesWebhookEvents: Bool
    /// Appended to a read of `webhook_events AS ev` past a cursor: only events before which no event
    /// can still commit. SQLite commits in order and needs none; on PostgreSQL, the events of
    /// transactions older than every transaction still running.
    package let settledWebhookEvents: String
    /// Ends a `NOT EXISTS` subquery that must run once per outer row, as an index lookup by that
    /// row's values. PostgreSQL would otherwise make it a join, and with the statistics of a queue
    /// table taken while it was empty (its open rows "one row"), the join read the whole index of
    /// open rows for every candidate: a claim of 27 rows took 9 ms instead of 1. `OFFSET 0` keeps it
    /// a subquery; SQLite runs such subqueries per row anyway.
    package let perRowSubquery: String
    /// Whether a status change counts the pushes it queues (and the starts it moves). SQLite runs
    /// each statement at once and counts for free. PostgreSQL writes them with statements sent
    /// without waiting: counting would cost the change a wait on the server (without those waits
    /// `RUNS=postgres` ran 13–23 % more changes a second), and its commit wakes every node's
    /// pushers (`deliveryd_outbox`) anyway.
    package let countsQueuedPushes: Bool

    package static let sqlite = SQLDialect(
        lockingRows: "", skippingLockedRows: "", lockingKey: nil, placesWebhookEvents: false, settledWebhookEvents: "",
        perRowSubquery: "", countsQueuedPushes: true)
    package static let postgres = SQLDialect(
        lockingRows: " FOR UPDATE", skippingLockedRows: " FOR UPDATE SKIP LOCKED",
        lockingKey: "SELECT pg_advisory_xact_lock(hashtextextended(?, 0)) AS locked", placesWebhookEvents: true,
        settledWebhookEvents: " AND ev.txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
        perRowSubquery: " OFFSET 0", countsQueuedPushes: false)
}

extension SQLStatement {
    package func run() throws { try run([]) }

    package func rows<T>(_ transform: (any DatabaseRow) throws -> T) throws -> [T] { try rows([], transform) }

    package func firstRow<T>(_ transform: (any DatabaseRow) throws -> T) throws -> T? { try firstRow([], transform) }
}
