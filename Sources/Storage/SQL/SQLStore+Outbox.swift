public import FoundationEssentials

extension SQLStore {
    /// Moves the lease of every row `owner` is still sending to `until`; returns how many.
    ///
    /// A worker calls it while it holds rows (a batch in flight, or outcomes not written yet), so
    /// that a batch slower than its lease is not claimed again and pushed twice. A worker that died
    /// stops calling it, and its rows come back when their lease runs out.
    public func extendLeases(owner: String, until: Date) throws(StorageError) -> Int {
        try writeSQL { connection in
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
    /// activity never has two pushes racing; and only a target's newest pending row is claimed, so
    /// that two rows of one activity are never planned from the same read and sent twice. (Two can
    /// be pending on PostgreSQL: a retry written beside a change does not see the change's new row.
    /// The older one is claimed once the newer is sent, and the planner finds nothing new in it.)
    ///
    /// - Note: Each statement names `state IN ('pending', 'sending')` so that SQLite may use the
    ///   partial index `outbox_open_by_target`, and the lease comparison is written `+lease_until` so
    ///   that it does not pick `outbox_leased` instead: with a backlog of 100,000 rows the difference
    ///   is a claim in microseconds against one that scans the backlog.
    public func claimDue(owner: String, now: Date, lease: TimeInterval, limit: Int) throws(StorageError) -> [OutboxItem]
    {
        try writeSQL { connection in
            try StoreSQL.claimDue(owner: owner, now: now, lease: lease, limit: limit, connection)
        }
    }

    /// Marks the starts APNs accepted before `sentBefore` whose order has had no activity registered
    /// since (each once: the row keeps the mark), and notes each in the order's push log. Starts sent
    /// more than a day before are left alone: the sent rows are pruned after a day.
    /// - Returns: the starts marked by this call.
    public func markStalledStarts(sentBefore: Date, now: Date) throws(StorageError) -> [StalledStart] {
        try writeSQL { connection in
            let stalled = try connection.plannedForValues(
                """
                UPDATE outbox SET last_error = ?
                WHERE state IN ('sent', 'superseded') AND state = 'sent' AND kind = 'start' AND last_error IS NULL
                  AND updated_at < ? AND updated_at >= ?
                  AND NOT EXISTS (
                      SELECT 1 FROM activities AS registered
                      WHERE registered.order_id = outbox.order_id AND registered.registered_at >= outbox.created_at)
                RETURNING order_id, kind, target_id, updated_at
                """
            ).rows([
                .text(StoreSQL.stalledStart), .integer(sentBefore.storageMilliseconds),
                .integer(sentBefore.addingTimeInterval(-86_400).storageMilliseconds),
            ]) { row in
                (
                    orderID: try row.text("order_id"), target: try StoreSQL.decodeTarget(row),
                    sentAt: Date(storageMilliseconds: try row.int("updated_at"))
                )
            }
            var marked: [StalledStart] = []
            for start in stalled {
                guard case .start(let customerID, let deviceID) = start.target,
                    let merchantID = try connection.cached("SELECT merchant_id FROM orders WHERE id = ?")
                        .firstRow([.text(start.orderID)], { try $0.text("merchant_id") })
                else { continue }
                let device = DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID)
                try StoreSQL.emitWebhook(
                    .activityStartStalled, orderID: start.orderID,
                    data: [
                        ("customerId", .string(customerID)), ("deviceId", .string(deviceID)),
                        ("startSentAt", .string(WebhookEventBody.iso8601(start.sentAt))),
                    ], now: now, connection)
                try StoreSQL.insertPushLog(
                    PushAttempt(
                        orderID: start.orderID, targetID: "start:" + deviceID, event: "start", priority: 10,
                        httpStatus: nil, reason: StoreSQL.stalledStart, apnsID: nil, latencyMilliseconds: nil,
                        attemptedAt: now),
                    connection)
                marked.append(
                    StalledStart(
                        orderID: start.orderID, device: device,
                        bundleID: try StoreSQL.pushToStart(device, connection)?.bundleID, sentAt: start.sentAt))
            }
            return marked.sorted { ($0.sentAt, $0.orderID) < ($1.sentAt, $1.orderID) }
        }
    }

    /// Rows waiting to be sent (pending or in flight), and the due time of the oldest one.
    public func outboxDepth() throws(StorageError) -> (count: Int, oldestDue: Date?) {
        try readSession { connection in
            try connection.cached(
                "SELECT count(*) AS depth, min(due_at) AS oldest FROM outbox WHERE state IN ('pending', 'sending')"
            ).firstRow([]) {
                (Int(try $0.int("depth")), try $0.optionalInt("oldest").map(Date.init(storageMilliseconds:)))
            } ?? (0, nil)
        }
    }

    /// Dead letters, newest first.
    public func deadLetters(limit: Int = 100) throws(StorageError) -> [DeadLetter] {
        try readSession { connection in
            try connection.cached(
                """
                SELECT id, order_id, kind, target_id, attempts, coalesce(last_error, '') AS reason, updated_at FROM outbox
                WHERE state = 'dead' ORDER BY updated_at DESC, id DESC LIMIT ?
                """
            ).rows([.integer(Int64(limit))]) { row in
                DeadLetter(
                    id: try row.int("id"), orderID: try row.text("order_id"), target: try StoreSQL.decodeTarget(row),
                    attempts: Int(try row.int("attempts")), reason: try row.text("reason"),
                    diedAt: Date(storageMilliseconds: try row.int("updated_at"))
                )
            }.map { letter in
                var letter = letter
                letter.platform = try StoreSQL.platform(of: letter.target, orderID: letter.orderID, connection)
                return letter
            }
        }
    }

    /// An order's push log, oldest first.
    public func pushLog(orderID: String) throws(StorageError) -> [PushAttempt] {
        try readSession { connection in
            try connection.cached(
                "SELECT \(StoreSQL.pushLogColumns) FROM push_log WHERE order_id = ? ORDER BY id"
            ).rows([.text(orderID)], StoreSQL.decodePushAttempt)
        }
    }

    /// The newest attempts that APNs did not accept (or that never reached it), newest first.
    public func recentPushFailures(limit: Int) throws(StorageError) -> [PushAttempt] {
        try readSession { connection in
            try connection.cached(
                """
                SELECT \(StoreSQL.pushLogColumns) FROM push_log
                WHERE http_status IS NULL OR http_status != 200 ORDER BY id DESC LIMIT ?
                """
            ).rows([.integer(Int64(limit))], StoreSQL.decodePushAttempt)
        }
    }

    /// How many dead letters are kept.
    public func deadLetterCount() throws(StorageError) -> Int {
        try readSession { connection in
            try connection.cached("SELECT count(*) AS dead FROM outbox WHERE state = 'dead'").firstRow([]) {
                Int(try $0.int("dead"))
            } ?? 0
        }
    }
}

extension StoreSQL {
    /// The state a row leaving `sending` (a retry, an expired lease) returns to: `superseded` when a
    /// newer row of its target is pending, since that one carries the newer state; else `pending`.
    /// (`state IN (…)` first, so that SQLite uses the partial index of live rows.)
    static let stateAfterSending = """
        CASE WHEN EXISTS (
            SELECT 1 FROM outbox AS newer
            WHERE newer.order_id = outbox.order_id AND newer.kind = outbox.kind
              AND newer.target_id = outbox.target_id AND newer.state IN ('pending', 'sending')
              AND newer.state = 'pending' AND newer.id > outbox.id)
        THEN 'superseded' ELSE 'pending' END
        """

    static func scheduleRetry(_ id: Int64, at: Date, error: String, now: Date, _ connection: any SQLSession) throws {
        try connection.cached(
            """
            UPDATE outbox SET state = \(StoreSQL.stateAfterSending),
                due_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
            WHERE id = ? AND state = 'sending'
            """
        ).run([.integer(at.storageMilliseconds), .text(error), .integer(now.storageMilliseconds), .integer(id)])
    }

    static func insertPushLog(_ attempt: PushAttempt, _ connection: any SQLSession) throws {
        try insertPushLogs([attempt], connection)
    }

    /// One attempt's values, in the order of `insertPushLogs`' columns.
    static func pushLogValues(_ attempt: PushAttempt) -> [DatabaseValue] {
        [
            .text(attempt.orderID), .text(attempt.targetID), .text(attempt.event), .integer(Int64(attempt.priority)),
            attempt.httpStatus.map { .integer(Int64($0)) } ?? .null, attempt.reason.map(DatabaseValue.text) ?? .null,
            attempt.apnsID.map(DatabaseValue.text) ?? .null,
            attempt.latencyMilliseconds.map { .integer(Int64($0)) } ?? .null,
            .integer(attempt.attemptedAt.storageMilliseconds), attempt.requestID.map(DatabaseValue.text) ?? .null,
            attempt.contentState.map(DatabaseValue.text) ?? .null, .text(attempt.platform.rawValue),
        ]
    }

    /// The reason a stalled start carries, in its outbox row and the order's push log.
    static let stalledStart = "NoUpdateTokenRegistered"

    fileprivate static let pushLogColumns =
        "order_id, target_id, event, priority, http_status, reason, apns_id, latency_ms, attempted_at, request_id, "
        + "content_state, platform"

    fileprivate static func decodePushAttempt(_ row: any DatabaseRow) throws -> PushAttempt {
        PushAttempt(
            orderID: try row.text("order_id"), targetID: try row.text("target_id"), event: try row.text("event"),
            priority: Int(try row.int("priority")), httpStatus: try row.optionalInt("http_status").map { Int($0) },
            reason: try row.optionalText("reason"), apnsID: try row.optionalText("apns_id"),
            latencyMilliseconds: try row.optionalInt("latency_ms").map { Int($0) },
            attemptedAt: Date(storageMilliseconds: try row.int("attempted_at")),
            requestID: try row.optionalText("request_id"), contentState: try row.optionalText("content_state"),
            platform: try row.value("platform")
        )
    }

    /// The platform of a row's device, if it is still registered.
    static func platform(of target: OutboxTarget, orderID: String, _ connection: any SQLSession) throws
        -> PushPlatform?
    {
        switch target {
        case .activity(let activityID):
            return try activity(orderID: orderID, activityID: activityID, connection)?.platform
        case .start(let customerID, let deviceID):
            let merchantID = try connection.cached("SELECT merchant_id FROM orders WHERE id = ?")
                .firstRow([.text(orderID)]) { try $0.text("merchant_id") }
            guard let merchantID else { return nil }
            return try pushToStart(
                DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID), connection)?.platform
        }
    }

    /// An outbox row's target from its `kind` and `target_id`; an unknown kind is thrown.
    fileprivate static func decodeTarget(_ row: any DatabaseRow) throws -> OutboxTarget {
        let kind = try row.text("kind")
        guard let target = OutboxTarget(kind: kind, targetID: try row.text("target_id")) else {
            throw StorageError("outbox row \(try row.int("id")) has an unknown kind \(kind)")
        }
        return target
    }

    static func finish(_ id: Int64, state: String, error: String?, now: Date, _ connection: any SQLSession) throws {
        try connection.cached(
            "UPDATE outbox SET state = ?, last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?"
        ).run([.text(state), error.map(DatabaseValue.text) ?? .null, .integer(now.storageMilliseconds), .integer(id)])
    }
}

extension StoreSQL {
    /// `SQLStore.claimDue` in the caller's transaction.
    static func claimDue(owner: String, now: Date, lease: TimeInterval, limit: Int, _ connection: any SQLSession)
        throws -> [OutboxItem]
    {
        let millis = now.storageMilliseconds
        try connection.cached(
            """
            UPDATE outbox SET state = \(StoreSQL.stateAfterSending), lease_owner = NULL, lease_until = NULL, updated_at = ?
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
                        AND ((busy.state = 'sending' AND +busy.lease_until > ?)
                            OR (busy.state = 'pending' AND busy.id > candidate.id))\(connection.dialect.perRowSubquery))
                ORDER BY due_at, id LIMIT ?\(connection.dialect.skippingLockedRows))
            RETURNING id, order_id, event_id, kind, target_id, attempts, due_at, created_at, request_id
            """
        ).rows([
            .text(owner), .integer(millis + Int64(lease * 1000)), .integer(millis), .integer(millis),
            .integer(millis), .integer(Int64(limit)),
        ]) { row in
            OutboxItem(
                id: try row.int("id"), orderID: try row.text("order_id"), eventID: try row.optionalInt("event_id"),
                target: try StoreSQL.decodeTarget(row), attempts: Int(try row.int("attempts")),
                dueAt: Date(storageMilliseconds: try row.int("due_at")),
                createdAt: Date(storageMilliseconds: try row.int("created_at")),
                requestID: try row.optionalText("request_id")
            )
        }.sorted { $0.id < $1.id }
    }
}
