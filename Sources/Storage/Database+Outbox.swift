public import FoundationEssentials

extension Database {
    /// Moves the lease of every row `owner` is still sending to `until`; returns how many.
    ///
    /// A worker calls it while it holds rows (a batch in flight, or outcomes not written yet), so
    /// that a batch slower than its lease is not claimed again and pushed twice. A worker that died
    /// stops calling it, and its rows come back when their lease runs out.
    public func extendLeases(owner: String, until: Date) throws(StorageError) -> Int {
        try writeConnection { connection in
            try connection.cached(
                "UPDATE outbox SET lease_until = ? WHERE state = 'sending' AND lease_owner = ? AND lease_until < ?"
            ).run([.integer(until.storageMilliseconds), .text(owner), .integer(until.storageMilliseconds)])
            return connection.changes
        }
    }

    /// Claims up to `limit` due rows for `owner` until `now + lease`, oldest first.
    ///
    /// A row is due when it is pending and its time has come. A row whose lease ran out (its worker
    /// crashed) is first put back as pending (or superseded, when a newer row for its target is
    /// waiting), so it comes back. A target with a row in flight under a live lease is skipped, so one
    /// activity never has two pushes racing.
    ///
    /// - Note: Each statement names `state IN ('pending', 'sending')` so that SQLite may use the
    ///   partial index `outbox_open_by_target`, and the lease comparison is written `+lease_until` so
    ///   that it does not pick `outbox_leased` instead: with a backlog of 100,000 rows the difference
    ///   is a claim in microseconds against one that scans the backlog.
    public func claimDue(owner: String, now: Date, lease: TimeInterval, limit: Int) throws(StorageError) -> [OutboxItem]
    {
        try writeConnection { connection in
            let millis = now.storageMilliseconds
            try connection.cached(
                """
                UPDATE outbox SET state = CASE WHEN EXISTS (
                        SELECT 1 FROM outbox AS newer
                        WHERE newer.order_id = outbox.order_id AND newer.kind = outbox.kind
                          AND newer.target_id = outbox.target_id AND newer.state IN ('pending', 'sending')
                          AND newer.state = 'pending' AND newer.id > outbox.id)
                    THEN 'superseded' ELSE 'pending' END,
                    lease_owner = NULL, lease_until = NULL, updated_at = ?
                WHERE state = 'sending' AND lease_until <= ?
                """
            ).run([.integer(millis), .integer(millis)])
            return try connection.cached(
                """
                UPDATE outbox SET state = 'sending', lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
                WHERE id IN (
                    SELECT id FROM outbox AS candidate
                    WHERE state = 'pending' AND due_at <= ?
                      AND NOT EXISTS (
                          SELECT 1 FROM outbox AS busy
                          WHERE busy.order_id = candidate.order_id AND busy.kind = candidate.kind
                            AND busy.target_id = candidate.target_id AND busy.state IN ('pending', 'sending')
                            AND busy.state = 'sending' AND +busy.lease_until > ?)
                    ORDER BY due_at, id LIMIT ?)
                RETURNING id, order_id, event_id, kind, target_id, attempts, due_at, created_at, request_id
                """
            ).rows([
                .text(owner), .integer(millis + Int64(lease * 1000)), .integer(millis), .integer(millis),
                .integer(millis), .integer(Int64(limit)),
            ]) { row in
                OutboxItem(
                    id: row.int(0) ?? 0, orderID: row.text(1) ?? "", eventID: row.int(2),
                    target: OutboxTarget(kind: row.text(3) ?? "", targetID: row.text(4) ?? "")
                        ?? .activity(activityID: row.text(4) ?? ""),
                    attempts: Int(row.int(5) ?? 0), dueAt: Date(storageMilliseconds: row.int(6) ?? 0),
                    createdAt: Date(storageMilliseconds: row.int(7) ?? 0), requestID: row.text(8)
                )
            }.sorted { $0.id < $1.id }
        }
    }

    static func scheduleRetry(_ id: Int64, at: Date, error: String, now: Date, _ connection: SQLiteConnection) throws {
        try connection.cached(
            """
            UPDATE outbox SET state = CASE WHEN EXISTS (
                    SELECT 1 FROM outbox AS newer WHERE newer.order_id = outbox.order_id AND newer.kind = outbox.kind
                      AND newer.target_id = outbox.target_id AND newer.state IN ('pending', 'sending')
                      AND newer.state = 'pending' AND newer.id > outbox.id)
                THEN 'superseded' ELSE 'pending' END,
                due_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
            WHERE id = ? AND state = 'sending'
            """
        ).run([.integer(at.storageMilliseconds), .text(error), .integer(now.storageMilliseconds), .integer(id)])
    }

    /// Rows waiting to be sent (pending or in flight), and the due time of the oldest one.
    public func outboxDepth() throws(StorageError) -> (count: Int, oldestDue: Date?) {
        try read { connection in
            try connection.cached("SELECT count(*), min(due_at) FROM outbox WHERE state IN ('pending', 'sending')")
                .firstRow([]) { (Int($0.int(0) ?? 0), $0.int(1).map(Date.init(storageMilliseconds:))) } ?? (0, nil)
        }
    }

    /// Dead letters, newest first.
    public func deadLetters(limit: Int = 100) throws(StorageError) -> [DeadLetter] {
        try read { connection in
            try connection.cached(
                """
                SELECT id, order_id, kind, target_id, attempts, coalesce(last_error, ''), updated_at FROM outbox
                WHERE state = 'dead' ORDER BY updated_at DESC, id DESC LIMIT ?
                """
            ).rows([.integer(Int64(limit))]) { row in
                DeadLetter(
                    id: row.int(0) ?? 0, orderID: row.text(1) ?? "",
                    target: OutboxTarget(kind: row.text(2) ?? "", targetID: row.text(3) ?? "")
                        ?? .activity(activityID: row.text(3) ?? ""),
                    attempts: Int(row.int(4) ?? 0), reason: row.text(5) ?? "",
                    diedAt: Date(storageMilliseconds: row.int(6) ?? 0)
                )
            }
        }
    }

    static func insertPushLog(_ attempt: PushAttempt, _ connection: SQLiteConnection) throws {
        try connection.cached(
            """
            INSERT INTO push_log (order_id, target_id, event, priority, http_status, reason, apns_id, latency_ms,
                attempted_at, request_id, content_state)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        ).run([
            .text(attempt.orderID), .text(attempt.targetID), .text(attempt.event), .integer(Int64(attempt.priority)),
            attempt.httpStatus.map { .integer(Int64($0)) } ?? .null, attempt.reason.map(SQLiteValue.text) ?? .null,
            attempt.apnsID.map(SQLiteValue.text) ?? .null,
            attempt.latencyMilliseconds.map { .integer(Int64($0)) } ?? .null,
            .integer(attempt.attemptedAt.storageMilliseconds), attempt.requestID.map(SQLiteValue.text) ?? .null,
            attempt.contentState.map(SQLiteValue.text) ?? .null,
        ])
    }

    /// An order's push log, oldest first.
    public func pushLog(orderID: String) throws(StorageError) -> [PushAttempt] {
        try read { connection in
            try connection.cached(
                "SELECT \(Self.pushLogColumns) FROM push_log WHERE order_id = ? ORDER BY id"
            ).rows([.text(orderID)], Self.decodePushAttempt)
        }
    }

    /// The newest attempts that APNs did not accept (or that never reached it), newest first.
    public func recentPushFailures(limit: Int) throws(StorageError) -> [PushAttempt] {
        try read { connection in
            try connection.cached(
                """
                SELECT \(Self.pushLogColumns) FROM push_log
                WHERE http_status IS NULL OR http_status != 200 ORDER BY id DESC LIMIT ?
                """
            ).rows([.integer(Int64(limit))], Self.decodePushAttempt)
        }
    }

    /// How many dead letters are kept.
    public func deadLetterCount() throws(StorageError) -> Int {
        try read { connection in
            try connection.cached("SELECT count(*) FROM outbox WHERE state = 'dead'").firstRow([]) {
                Int($0.int(0) ?? 0)
            } ?? 0
        }
    }

    private static let pushLogColumns =
        "order_id, target_id, event, priority, http_status, reason, apns_id, latency_ms, attempted_at, request_id, "
        + "content_state"

    private static func decodePushAttempt(_ row: SQLiteRow) -> PushAttempt {
        PushAttempt(
            orderID: row.text(0) ?? "", targetID: row.text(1) ?? "", event: row.text(2) ?? "",
            priority: Int(row.int(3) ?? 0), httpStatus: row.int(4).map { Int($0) }, reason: row.text(5),
            apnsID: row.text(6), latencyMilliseconds: row.int(7).map { Int($0) },
            attemptedAt: Date(storageMilliseconds: row.int(8) ?? 0), requestID: row.text(9),
            contentState: row.text(10)
        )
    }

    static func finish(_ id: Int64, state: String, error: String?, now: Date, _ connection: SQLiteConnection) throws {
        try connection.cached(
            "UPDATE outbox SET state = ?, last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?"
        ).run([.text(state), error.map(SQLiteValue.text) ?? .null, .integer(now.storageMilliseconds), .integer(id)])
    }
}
