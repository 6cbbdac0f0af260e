import DeliveryActivityContract
public import FoundationEssentials
import OrderDomain

extension SQLStore {
    public func createWebhookEndpoint(_ endpoint: WebhookEndpointRecord) throws(StorageError) {
        try writeSQL { connection in
            try connection.cached(
                """
                INSERT INTO webhook_endpoints (id, merchant_id, url, description, event_types, enabled, disabled_reason,
                    secret_sealed, previous_secret_sealed, previous_secret_expires_at, failing_since,
                    last_delivered_at, paused_until, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
            ).run(StoreSQL.encode(endpoint))
            // A new endpoint is told what happens from now on; what came before is there to replay.
            try StoreSQL.moveCursorToNewest(endpointID: endpoint.id, merchantID: endpoint.merchantID, connection)
        }
    }

    public func webhookEndpoint(id: String) throws(StorageError) -> WebhookEndpointRecord? {
        try readSession { connection in
            try connection.cached("SELECT * FROM webhook_endpoints WHERE id = ?")
                .firstRow([.text(id)], StoreSQL.decodeEndpoint)
        }
    }

    public func webhookEndpoints(merchantID: String?) throws(StorageError) -> [WebhookEndpointRecord] {
        try readSession { connection in
            if let merchantID {
                return try connection.cached(
                    "SELECT * FROM webhook_endpoints WHERE merchant_id = ? ORDER BY created_at, id"
                ).rows([.text(merchantID)], StoreSQL.decodeEndpoint)
            }
            return try connection.cached("SELECT * FROM webhook_endpoints ORDER BY created_at, id")
                .rows(StoreSQL.decodeEndpoint)
        }
    }

    @discardableResult
    public func updateWebhookEndpoint(_ endpoint: WebhookEndpointRecord) throws(StorageError) -> Bool {
        try writeSQL { connection in
            let wasEnabled = try connection.cached("SELECT enabled FROM webhook_endpoints WHERE id = ?")
                .firstRow([.text(endpoint.id)]) { try $0.int("enabled") != 0 }
            try connection.cached(
                """
                UPDATE webhook_endpoints SET id = ?, merchant_id = ?, url = ?, description = ?, event_types = ?,
                    enabled = ?, disabled_reason = ?, secret_sealed = ?, previous_secret_sealed = ?,
                    previous_secret_expires_at = ?, failing_since = ?, last_delivered_at = ?, paused_until = ?,
                    created_at = ?, updated_at = ?
                WHERE id = ?
                """
            ).run(StoreSQL.encode(endpoint) + [.text(endpoint.id)])
            guard connection.changes > 0 else { return false }
            // Enabled again: like a new endpoint, from now on (a disabled one was sent nothing, and
            // the gap is there to replay).
            if wasEnabled == false, endpoint.enabled {
                try StoreSQL.moveCursorToNewest(endpointID: endpoint.id, merchantID: endpoint.merchantID, connection)
            }
            return true
        }
    }

    @discardableResult
    public func deleteWebhookEndpoint(id: String) throws(StorageError) -> Bool {
        try writeSQL { connection in
            try connection.cached("DELETE FROM webhook_deliveries WHERE endpoint_id = ?").run([.text(id)])
            try connection.cached("DELETE FROM webhook_attempts WHERE endpoint_id = ?").run([.text(id)])
            try connection.cached("DELETE FROM webhook_endpoints WHERE id = ?").run([.text(id)])
            return connection.changes > 0
        }
    }

    public func replayWebhooks(endpointID: String, _ replay: WebhookReplay, limit: Int, now: Date)
        throws(StorageError) -> WebhookReplayOutcome
    {
        try writeSQL { connection in
            guard
                let endpoint = try connection.cached("SELECT * FROM webhook_endpoints WHERE id = ?")
                    .firstRow([.text(endpointID)], StoreSQL.decodeEndpoint)
            else { return WebhookReplayOutcome(queued: 0, resumeAt: nil) }
            var events: [StoreSQL.ReplayedEvent]
            var resumeAt: Date?
            switch replay {
            case .event(let id):
                events = try connection.cached(
                    "SELECT id, type, created_at, txid, seq FROM webhook_events WHERE id = ? AND merchant_id = ?"
                ).rows([.text(id), .text(endpoint.merchantID)], StoreSQL.decodeReplayed)
            case .range(let from, let to):
                // One more than the limit: whether the range goes on, and from when.
                events = try connection.cached(
                    """
                    SELECT id, type, created_at, txid, seq FROM webhook_events
                    WHERE merchant_id = ? AND created_at >= ? AND created_at <= ?
                    ORDER BY created_at, id LIMIT ?
                    """
                ).rows(
                    [
                        .text(endpoint.merchantID), .integer(from.storageMilliseconds),
                        .integer(to.storageMilliseconds), .integer(Int64(max(1, limit) + 1)),
                    ], StoreSQL.decodeReplayed)
                if events.count > max(1, limit), let last = events.dropLast().last {
                    // Cut after a whole millisecond, so that the next replay, from the one after, misses
                    // nothing and repeats nothing.
                    events.removeLast()
                    events += try connection.cached(
                        """
                        SELECT id, type, created_at, txid, seq FROM webhook_events
                        WHERE merchant_id = ? AND created_at = ? AND id > ? ORDER BY id
                        """
                    ).rows(
                        [.text(endpoint.merchantID), .integer(last.createdAt), .text(last.id)], StoreSQL.decodeReplayed)
                    resumeAt = Date(storageMilliseconds: last.createdAt + 1)
                }
            }
            let cursor = try StoreSQL.cursor(endpointID: endpointID, connection)
            var queued = 0
            for event in events {
                guard let type = WebhookEventType(rawValue: event.type), endpoint.wants(type) else { continue }
                // Not read from the stream yet: it is on its way already.
                guard event.position <= cursor else { continue }
                // One open delivery of an event to an endpoint at a time: a replay of one still queued is a no-op.
                let open =
                    try connection.cached(
                        """
                        SELECT count(*) AS open FROM webhook_deliveries
                        WHERE endpoint_id = ? AND event_id = ? AND state IN ('pending', 'sending')
                        """
                    ).firstRow([.text(endpointID), .text(event.id)]) { try $0.int("open") } ?? 0
                guard open == 0 else { continue }
                try StoreSQL.queueDelivery(endpointID: endpointID, eventID: event.id, now: now, connection)
                queued += 1
            }
            return WebhookReplayOutcome(queued: queued, resumeAt: resumeAt)
        }
    }

    public func claimWebhookDeliveries(
        owner: String, now: Date, lease: TimeInterval, limit: Int, perEndpoint: Int, inFlight: [String: Int],
        streams: [String: WebhookStreamProgress]
    ) throws(StorageError) -> WebhookClaim {
        try exchangeWebhookDeliveries(
            [], owner: owner, now: now, lease: lease, limit: limit, perEndpoint: perEndpoint, inFlight: inFlight,
            streams: streams)
    }

    public func completeWebhookDeliveries(_ completions: [WebhookCompletion], now: Date) throws(StorageError) {
        guard !completions.isEmpty else { return }
        try writeSQL { connection in try StoreSQL.complete(completions, now: now, connection) }
    }

    public func exchangeWebhookDeliveries(
        _ completions: [WebhookCompletion], owner: String, now: Date, lease: TimeInterval, limit: Int,
        perEndpoint: Int, inFlight: [String: Int], streams: [String: WebhookStreamProgress]
    ) throws(StorageError) -> WebhookClaim {
        let millis = now.storageMilliseconds
        // Polled every second on every node: an idle queue is seen with a read, so it costs no commit
        // (no fsync on SQLite, no write-ahead log record on PostgreSQL).
        var hasWork = false
        if limit > 0 {
            hasWork = try readSession { connection in
                try connection.cached(
                    """
                    SELECT CASE WHEN EXISTS (SELECT 1 FROM webhook_deliveries WHERE state = 'pending' AND due_at <= ?)
                        OR EXISTS (SELECT 1 FROM webhook_deliveries WHERE state = 'sending' AND lease_until < ?)
                        OR EXISTS (SELECT 1 \(StoreSQL.readableStreams(connection.dialect)))
                        THEN 1 ELSE 0 END AS due
                    """
                ).firstRow([.integer(millis), .integer(millis), .integer(millis), .text(owner), .integer(millis)]) {
                    try $0.int("due") == 1
                } ?? false
            }
        }
        guard hasWork || !completions.isEmpty || !streams.isEmpty else { return WebhookClaim() }
        return try writeSQL { connection in
            try StoreSQL.complete(completions, now: now, connection)
            let leaseUntil = now.addingTimeInterval(lease).storageMilliseconds
            try StoreSQL.record(streams, owner: owner, leaseUntil: leaseUntil, connection)
            guard hasWork else { return WebhookClaim() }
            var held = inFlight
            var claim = WebhookClaim()
            claim.deliveries = try StoreSQL.claimRows(
                owner: owner, now: now, leaseUntil: leaseUntil, limit: limit, perEndpoint: perEndpoint, held: &held,
                connection)
            try StoreSQL.claimStreams(
                owner: owner, now: now, leaseUntil: leaseUntil, limit: limit - claim.deliveries.count,
                perEndpoint: perEndpoint, held: held, streams: streams, into: &claim, connection)
            return claim
        }
    }

    public func releaseWebhookStreams(owner: String) throws(StorageError) {
        try writeSQL { connection in
            try connection.cached(
                "UPDATE webhook_endpoints SET stream_owner = NULL, stream_lease_until = NULL WHERE stream_owner = ?"
            ).run([.text(owner)])
        }
    }

    public func webhookAttempts(endpointID: String, limit: Int) throws(StorageError) -> [WebhookAttempt] {
        try readSession { connection in
            try connection.cached(
                """
                SELECT a.*, ev.type FROM webhook_attempts AS a LEFT JOIN webhook_events AS ev ON ev.id = a.event_id
                WHERE a.endpoint_id = ? ORDER BY a.id DESC LIMIT ?
                """
            ).rows([.text(endpointID), .integer(Int64(limit))]) { row in
                WebhookAttempt(
                    endpointID: try row.text("endpoint_id"), eventID: try row.text("event_id"),
                    eventType: try row.optionalText("type").flatMap(WebhookEventType.init(rawValue:)),
                    attempt: Int(try row.int("attempt")),
                    attemptedAt: Date(storageMilliseconds: try row.int("attempted_at")),
                    httpStatus: try row.optionalInt("http_status").map(Int.init), error: try row.optionalText("error"),
                    durationMilliseconds: Int(try row.int("duration_ms")))
            }
        }
    }

    public func webhookQueueCounts(endpointID: String?) throws(StorageError) -> WebhookQueueCounts {
        try readSession { connection in
            var counts = WebhookQueueCounts()
            let rows =
                if let endpointID {
                    try connection.cached(
                        """
                        SELECT state, count(*) AS n, min(due_at) AS oldest FROM webhook_deliveries
                        WHERE endpoint_id = ? GROUP BY state
                        """
                    ).rows([.text(endpointID)], StoreSQL.decodeStateCount)
                } else {
                    // Only what is open, each read from its partial index: the delivered and failed
                    // rows of every endpoint are 30 days of history, too many to count on every scrape.
                    try connection.cached(
                        """
                        SELECT 'pending' AS state, count(*) AS n, min(due_at) AS oldest FROM webhook_deliveries
                        WHERE state = 'pending'
                        """
                    ).rows(StoreSQL.decodeStateCount)
                        + connection.cached(
                            """
                            SELECT 'sending' AS state, count(*) AS n, NULL AS oldest FROM webhook_deliveries
                            WHERE state = 'sending'
                            """
                        ).rows(StoreSQL.decodeStateCount)
                }
            for (state, count, oldest) in rows {
                switch state {
                case "pending":
                    counts.pending = count
                    counts.oldestPendingDue = oldest.map(Date.init(storageMilliseconds:))
                case "sending": counts.sending = count
                case "delivered": break  // a retry's row; every delivery is counted on its endpoint below
                default: counts.failed = count
                }
            }
            // The events of enabled endpoints' streams not finished yet (read or not), of the types
            // each wants, are pending too.
            // Past the cursor as two ranges of the stream's index (see `readableStreams`).
            let unreadSQL = """
                SELECT count(*) AS n, min(created_at) AS oldest FROM (
                    SELECT ev.created_at, e.id AS endpoint_id FROM webhook_endpoints AS e
                    JOIN webhook_events AS ev ON ev.merchant_id = e.merchant_id
                      AND ev.txid = e.cursor_txid AND ev.seq > e.cursor_seq
                    WHERE e.enabled = 1
                      AND (e.event_types = '' OR (' ' || e.event_types || ' ') LIKE ('% ' || ev.type || ' %'))
                    UNION ALL
                    SELECT ev.created_at, e.id AS endpoint_id FROM webhook_endpoints AS e
                    JOIN webhook_events AS ev ON ev.merchant_id = e.merchant_id AND ev.txid > e.cursor_txid
                    WHERE e.enabled = 1
                      AND (e.event_types = '' OR (' ' || e.event_types || ' ') LIKE ('% ' || ev.type || ' %'))
                ) AS unread
                """
            let decodeUnread = { (row: any DatabaseRow) throws -> (count: Int, oldest: Int64?) in
                (count: Int(try row.int("n")), oldest: try row.optionalInt("oldest"))
            }
            let unread =
                if let endpointID {
                    try connection.cached(unreadSQL + " WHERE endpoint_id = ?").firstRow(
                        [.text(endpointID)], decodeUnread)
                } else {
                    try connection.cached(unreadSQL).firstRow(decodeUnread)
                }
            if let unread, unread.count > 0 {
                counts.pending += unread.count
                let oldest = unread.oldest.map(Date.init(storageMilliseconds:))
                counts.oldestPendingDue = [counts.oldestPendingDue, oldest].compactMap { $0 }.min()
            }
            if let endpointID {
                counts.delivered =
                    try connection.cached("SELECT delivered_count FROM webhook_endpoints WHERE id = ?")
                    .firstRow([.text(endpointID)]) { Int(try $0.int("delivered_count")) } ?? 0
            }
            return counts
        }
    }

    public func webhookEvents(merchantID: String, limit: Int) throws(StorageError) -> [WebhookEventRecord] {
        try readSession { connection in
            try connection.cached(
                "SELECT * FROM webhook_events WHERE merchant_id = ? ORDER BY created_at DESC, id DESC LIMIT ?"
            ).rows([.text(merchantID), .integer(Int64(limit))]) { row in
                WebhookEventRecord(
                    id: try row.text("id"), merchantID: try row.text("merchant_id"), type: try row.value("type"),
                    createdAt: Date(storageMilliseconds: try row.int("created_at")), body: try row.blob("body"))
            }
        }
    }
}

extension StoreSQL {
    /// `FROM … WHERE …` of the endpoints whose stream a sender (`?` 2) may read now (`?` 1 and 3)
    /// and that have events past their cursor, as `e`. "Past the cursor" is written as two ranges of
    /// the stream's index: as one row-value comparison against another table's columns SQLite
    /// searched only by `txid`, which is always 0 there, and so read every event of the merchant.
    static func readableStreams(_ dialect: SQLDialect) -> String {
        """
        FROM webhook_endpoints AS e
        WHERE e.enabled = 1 AND (e.paused_until IS NULL OR e.paused_until <= ?)
          AND (e.stream_owner IS NULL OR e.stream_owner = ? OR e.stream_lease_until < ?)
          AND (EXISTS (SELECT 1 FROM webhook_events AS ev WHERE ev.merchant_id = e.merchant_id
              AND ev.txid = e.cursor_txid AND ev.seq > e.cursor_seq\(dialect.settledWebhookEvents))
            OR EXISTS (SELECT 1 FROM webhook_events AS ev WHERE ev.merchant_id = e.merchant_id
              AND ev.txid > e.cursor_txid\(dialect.settledWebhookEvents)))
        """
    }

    /// Writes how far a sender got with its streams: the cursors that moved on (never back: an
    /// endpoint enabled again starts after them), and the leases of the streams still held.
    static func record(
        _ streams: [String: WebhookStreamProgress], owner: String, leaseUntil: Int64, _ connection: any SQLSession
    ) throws {
        for (endpointID, progress) in streams.sorted(by: { $0.key < $1.key }) {
            if let cursor = progress.finishedThrough {
                try connection.cached(
                    """
                    UPDATE webhook_endpoints SET cursor_txid = ?, cursor_seq = ?
                    WHERE id = ? AND stream_owner = ? AND (cursor_txid, cursor_seq) < (?, ?)
                    """
                ).run([
                    .integer(cursor.transaction), .integer(cursor.sequence), .text(endpointID), .text(owner),
                    .integer(cursor.transaction), .integer(cursor.sequence),
                ])
            }
            if progress.holding {
                try connection.cached(
                    "UPDATE webhook_endpoints SET stream_lease_until = ? WHERE id = ? AND stream_owner = ?"
                ).run([.integer(leaseUntil), .text(endpointID), .text(owner)])
            }
        }
    }

    /// Leases up to `limit` due outbox rows (retries and replays) of enabled, unpaused endpoints, at
    /// most `perEndpoint` held by endpoint, counted in `held`.
    static func claimRows(
        owner: String, now: Date, leaseUntil: Int64, limit: Int, perEndpoint: Int, held: inout [String: Int],
        _ connection: any SQLSession
    ) throws -> [WebhookDelivery] {
        let millis = now.storageMilliseconds
        // Leases of a node that stopped mid-attempt run out: their deliveries are due again.
        try connection.cached(
            """
            UPDATE webhook_deliveries SET state = 'pending', lease_owner = NULL, lease_until = NULL
            WHERE state = 'sending' AND lease_until < ?
            """
        ).run([.integer(millis)])
        // More candidates than asked for: those of endpoints at their cap are passed over. No row
        // locks: the conditional update below is what gives each delivery to one node.
        let candidates = try connection.cached(
            """
            SELECT d.id, d.endpoint_id FROM webhook_deliveries AS d
            JOIN webhook_endpoints AS e ON e.id = d.endpoint_id
            WHERE d.state = 'pending' AND d.due_at <= ? AND e.enabled = 1
              AND (e.paused_until IS NULL OR e.paused_until <= ?)
            ORDER BY d.due_at, d.id LIMIT ?
            """
        ).rows([.integer(millis), .integer(millis), .integer(Int64(limit * 4))]) {
            (id: try $0.int("id"), endpoint: try $0.text("endpoint_id"))
        }
        var chosen: [Int64] = []
        for candidate in candidates where chosen.count < limit {
            let count = held[candidate.endpoint, default: 0]
            guard count < perEndpoint else { continue }
            held[candidate.endpoint] = count + 1
            chosen.append(candidate.id)
        }
        var claimed: [WebhookDelivery] = []
        for id in chosen {
            try connection.cached(
                """
                UPDATE webhook_deliveries SET state = 'sending', lease_owner = ?, lease_until = ?, updated_at = ?
                WHERE id = ? AND state = 'pending'
                """
            ).run([.text(owner), .integer(leaseUntil), .integer(millis), .integer(id)])
            guard connection.changes == 1 else { continue }
            if let delivery = try connection.cached(
                """
                SELECT d.id, d.endpoint_id, d.event_id, d.attempts, ev.created_at AS event_created_at, ev.body, e.url,
                    e.secret_sealed, e.previous_secret_sealed, e.previous_secret_expires_at, e.failing_since
                FROM webhook_deliveries AS d
                JOIN webhook_endpoints AS e ON e.id = d.endpoint_id
                JOIN webhook_events AS ev ON ev.id = d.event_id
                WHERE d.id = ?
                """
            ).firstRow([.integer(id)], { try StoreSQL.decodeDelivery($0, now: now) }) {
                claimed.append(delivery)
            }
        }
        return claimed
    }

    /// Reads the new events of the endpoints whose stream `owner` holds or can take, up to `limit`
    /// wanted ones and each endpoint's room, and takes the lease of each stream it read from.
    /// Events of types an endpoint does not want are read past without a delivery.
    static func claimStreams(
        owner: String, now: Date, leaseUntil: Int64, limit: Int, perEndpoint: Int, held: [String: Int],
        streams: [String: WebhookStreamProgress], into claim: inout WebhookClaim, _ connection: any SQLSession
    ) throws {
        guard limit > 0 else { return }
        let millis = now.storageMilliseconds
        let endpoints = try connection.cached(
            """
            SELECT e.id, e.event_types, e.merchant_id, e.url, e.secret_sealed, e.previous_secret_sealed,
                e.previous_secret_expires_at, e.failing_since, e.stream_owner
            \(readableStreams(connection.dialect))
            ORDER BY e.id
            """
        ).rows([.integer(millis), .text(owner), .integer(millis)]) { row in
            (
                id: try row.text("id"), merchantID: try row.text("merchant_id"),
                types: try row.text("event_types").split(separator: " ").map(String.init),
                ownedHere: try row.optionalText("stream_owner") == owner,
                template: try decodeDeliveryEndpoint(row, now: now)
            )
        }
        var room = limit
        for endpoint in endpoints where room > 0 {
            let endpointRoom = min(room, perEndpoint - held[endpoint.id, default: 0])
            guard endpointRoom > 0 else { continue }
            // The lease first, taken only if still free, expired or ours: on PostgreSQL another node
            // may have read the same endpoint as free a moment ago, and its update, waited for,
            // leaves this one nothing to change. The cursor is read again with it: the node it was
            // taken over from may have moved it since.
            guard
                let cursor = try connection.cached(
                    """
                    UPDATE webhook_endpoints SET stream_owner = ?, stream_lease_until = ?
                    WHERE id = ? AND (stream_owner IS NULL OR stream_owner = ? OR stream_lease_until < ?)
                    RETURNING cursor_txid, cursor_seq
                    """
                ).firstRow(
                    [.text(owner), .integer(leaseUntil), .text(endpoint.id), .text(owner), .integer(millis)],
                    {
                        WebhookEventPosition(transaction: try $0.int("cursor_txid"), sequence: try $0.int("cursor_seq"))
                    })
            else { continue }
            // Past what this sender read already while it held the stream; else past the cursor
            // (a stream taken over from a sender that stopped starts again where that one finished).
            let after = (endpoint.ownedHere ? streams[endpoint.id]?.readThrough : nil) ?? cursor
            // An event with a row already failed here once (a sender that stopped had read past the
            // cursor, and its failure was written): its row retries it, the stream passes over it.
            let events = try connection.cached(
                """
                SELECT ev.id, ev.type, ev.created_at, ev.body, ev.txid, ev.seq,
                    CASE WHEN EXISTS (SELECT 1 FROM webhook_deliveries AS d
                        WHERE d.event_id = ev.id AND d.endpoint_id = ?) THEN 1 ELSE 0 END AS queued
                FROM webhook_events AS ev
                WHERE ev.merchant_id = ? AND (ev.txid, ev.seq) > (?, ?)\(connection.dialect.settledWebhookEvents)
                ORDER BY ev.txid, ev.seq LIMIT ?
                """
            ).rows([
                .text(endpoint.id), .text(endpoint.merchantID), .integer(after.transaction), .integer(after.sequence),
                .integer(Int64(endpointRoom)),
            ]) { row in
                (
                    id: try row.text("id"), type: try row.text("type"), createdAt: try row.int("created_at"),
                    body: try row.blob("body"),
                    position: WebhookEventPosition(transaction: try row.int("txid"), sequence: try row.int("seq")),
                    queued: try row.int("queued") == 1
                )
            }
            guard let last = events.last else { continue }
            claim.readThrough[endpoint.id] = last.position
            for event in events
            where !event.queued && (endpoint.types.isEmpty || endpoint.types.contains(event.type)) {
                let template = endpoint.template
                claim.deliveries.append(
                    WebhookDelivery(
                        source: .stream(event.position), endpointID: endpoint.id, eventID: event.id,
                        eventCreatedAt: Date(storageMilliseconds: event.createdAt), attempts: 0, body: event.body,
                        url: template.url, secretSealed: template.secretSealed,
                        previousSecretSealed: template.previousSecretSealed, failingSince: template.failingSince))
                room -= 1
            }
        }
    }

    /// Puts an endpoint's cursor at its merchant's newest event: it is sent what comes after.
    static func moveCursorToNewest(endpointID: String, merchantID: String, _ connection: any SQLSession) throws {
        let newest = try connection.cached(
            "SELECT txid, seq FROM webhook_events WHERE merchant_id = ? ORDER BY txid DESC, seq DESC LIMIT 1"
        ).firstRow([.text(merchantID)]) {
            WebhookEventPosition(transaction: try $0.int("txid"), sequence: try $0.int("seq"))
        }
        guard let newest else { return }
        try connection.cached("UPDATE webhook_endpoints SET cursor_txid = ?, cursor_seq = ? WHERE id = ?")
            .run([.integer(newest.transaction), .integer(newest.sequence), .text(endpointID)])
    }

    /// An endpoint's cursor: every event up to it is finished for the endpoint.
    static func cursor(endpointID: String, _ connection: any SQLSession) throws -> WebhookEventPosition {
        try connection.cached("SELECT cursor_txid, cursor_seq FROM webhook_endpoints WHERE id = ?")
            .firstRow([.text(endpointID)]) {
                WebhookEventPosition(transaction: try $0.int("cursor_txid"), sequence: try $0.int("cursor_seq"))
            } ?? WebhookEventPosition(transaction: 0, sequence: 0)
    }

    /// What a delivery takes from its endpoint.
    struct DeliveryEndpoint {
        let url: String
        let secretSealed: [UInt8]
        let previousSecretSealed: [UInt8]?
        let failingSince: Date?
    }

    static func decodeDeliveryEndpoint(_ row: any DatabaseRow, now: Date) throws -> DeliveryEndpoint {
        let previousExpires = try row.optionalInt("previous_secret_expires_at").map(Date.init(storageMilliseconds:))
        return DeliveryEndpoint(
            url: try row.text("url"), secretSealed: try row.blob("secret_sealed"),
            previousSecretSealed: (previousExpires.map { $0 > now } ?? false)
                ? try row.optionalBlob("previous_secret_sealed") : nil,
            failingSince: try row.optionalInt("failing_since").map(Date.init(storageMilliseconds:)))
    }

    /// An event a replay looks at.
    struct ReplayedEvent {
        let id: String
        let type: String
        let createdAt: Int64
        let position: WebhookEventPosition
    }

    /// Writes a round of attempts: the log, the deliveries' states and the endpoints' health.
    static func complete(_ completions: [WebhookCompletion], now: Date, _ connection: any SQLSession) throws {
        let millis = now.storageMilliseconds
        // Per endpoint: the first failure after its last delivered attempt of this round, if any.
        var health: [String: Int64] = [:]
        var delivered: [String: Int] = [:]
        for completion in completions {
            let delivery = completion.delivery
            try connection.cached(
                """
                INSERT INTO webhook_attempts (endpoint_id, event_id, attempt, attempted_at, http_status, error,
                    duration_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
            ).run([
                .text(delivery.endpointID), .text(delivery.eventID), .integer(Int64(delivery.attempts + 1)),
                .integer(completion.attemptedAt.storageMilliseconds),
                completion.httpStatus.map { .integer(Int64($0)) } ?? .null,
                completion.error.map(DatabaseValue.text) ?? .null,
                .integer(Int64(completion.durationMilliseconds)),
            ])
            let (state, due): (String, Int64) =
                switch completion.outcome {
                case .delivered: ("delivered", millis)
                case .retry(let at): ("pending", at.storageMilliseconds)
                case .failed: ("failed", millis)
                }
            switch delivery.source {
            case .row(let id):
                try connection.cached(
                    """
                    UPDATE webhook_deliveries SET state = ?, due_at = ?, attempts = attempts + 1, last_error = ?,
                        lease_owner = NULL, lease_until = NULL, updated_at = ?
                    WHERE id = ? AND state = 'sending'
                    """
                ).run([
                    .text(state), .integer(due), completion.error.map(DatabaseValue.text) ?? .null, .integer(millis),
                    .integer(id),
                ])
            case .stream:
                // A delivered event leaves nothing behind but its line in the log; one that failed
                // becomes a row, retried from the outbox, or kept as given up.
                if case .delivered = completion.outcome { break }
                // Nothing to retry for an endpoint deleted meanwhile (or an event pruned).
                let both = try connection.cached(
                    """
                    SELECT count(*) AS n FROM webhook_endpoints AS e, webhook_events AS ev WHERE e.id = ? AND ev.id = ?
                    """
                ).firstRow([.text(delivery.endpointID), .text(delivery.eventID)]) { try $0.int("n") }
                guard both == 1 else { break }
                try connection.cached(
                    """
                    INSERT INTO webhook_deliveries (endpoint_id, event_id, state, attempts, due_at, last_error,
                        created_at, updated_at)
                    VALUES (?, ?, ?, 1, ?, ?, ?, ?)
                    """
                ).run([
                    .text(delivery.endpointID), .text(delivery.eventID), .text(state), .integer(due),
                    completion.error.map(DatabaseValue.text) ?? .null, .integer(millis), .integer(millis),
                ])
            }
            // An endpoint's health is written once per round, from its last attempt in it.
            if case .delivered = completion.outcome {
                health[delivery.endpointID] = nil
                delivered[delivery.endpointID, default: 0] += 1
            } else if health[delivery.endpointID] == nil {
                health[delivery.endpointID] = completion.attemptedAt.storageMilliseconds
            }
            switch completion.endpointChange {
            case .none: break
            case .pause(let until):
                try connection.cached(
                    "UPDATE webhook_endpoints SET paused_until = ?, updated_at = ? WHERE id = ?"
                ).run([.integer(until.storageMilliseconds), .integer(millis), .text(delivery.endpointID)])
            case .disable(let reason):
                try connection.cached(
                    "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?"
                ).run([.text(reason), .integer(millis), .text(delivery.endpointID)])
            }
        }
        for (endpointID, count) in delivered.sorted(by: { $0.key < $1.key }) {
            try connection.cached(
                """
                UPDATE webhook_endpoints SET failing_since = ?, last_delivered_at = ?,
                    delivered_count = delivered_count + ?
                WHERE id = ?
                """
            ).run([
                health[endpointID].map(DatabaseValue.integer) ?? .null, .integer(millis), .integer(Int64(count)),
                .text(endpointID),
            ])
        }
        for (endpointID, failedAt) in health.sorted(by: { $0.key < $1.key }) where delivered[endpointID] == nil {
            try connection.cached(
                "UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?) WHERE id = ?"
            ).run([.integer(failedAt), .text(endpointID)])
        }
    }

    /// Stores an event of a merchant, in the transaction of the change that caused it; each of its
    /// endpoints reads it from there (its stream). A merchant without endpoints gets nothing stored.
    ///
    /// On SQLite one indexed read is all a change pays when no one listens, and `data` is built
    /// only when the merchant has an endpoint: most changes have none to tell, and this runs inside
    /// the writer's transaction, which every write waits for. PostgreSQL places the event in its
    /// stream itself, so the insert tests for an endpoint and goes out without waiting: a read would
    /// cost a change a round trip to the server, more than building `data` in vain.
    static func emitWebhook(
        _ type: WebhookEventType, merchantID: String, data: @autoclosure () -> [(String, WebhookField)], now: Date,
        _ connection: any SQLSession
    ) throws {
        if connection.dialect.placesWebhookEvents {
            // Stored even when every endpoint is disabled: a re-enabled endpoint can replay the gap.
            try connection.send(
                """
                INSERT INTO webhook_events (id, merchant_id, type, created_at, body)
                SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE merchant_id = ?)
                """,
                [
                    .text(WebhookEventBody.newEventID(now: now)), .text(merchantID), .text(type.rawValue),
                    .integer(now.storageMilliseconds),
                    .blob(WebhookEventBody.encode(type: type, timestamp: now, data: data())),
                    .text(merchantID),
                ])
            return
        }
        // One statement: whether anyone listens, and where the merchant's numbering of events is.
        let stream =
            try connection.cached(
                """
                SELECT count(*) AS endpoints, max(cursor_seq) AS cursor,
                    (SELECT max(seq) FROM webhook_events WHERE merchant_id = ? AND txid = 0) AS last
                FROM webhook_endpoints WHERE merchant_id = ?
                """
            ).firstRow([.text(merchantID), .text(merchantID)]) {
                (
                    endpoints: try $0.int("endpoints"), cursor: try $0.optionalInt("cursor"),
                    last: try $0.optionalInt("last")
                )
            }
        // Stored even when every endpoint is disabled: a re-enabled endpoint can replay the gap.
        guard let stream, stream.endpoints > 0 else { return }
        // After the merchant's last event, and after every cursor: the last may have been pruned.
        let sequence = max(stream.last ?? 0, stream.cursor ?? 0) + 1
        try connection.cached(
            "INSERT INTO webhook_events (id, merchant_id, type, created_at, body, seq) VALUES (?, ?, ?, ?, ?, ?)"
        ).run([
            .text(WebhookEventBody.newEventID(now: now)), .text(merchantID), .text(type.rawValue),
            .integer(now.storageMilliseconds), .blob(WebhookEventBody.encode(type: type, timestamp: now, data: data())),
            .integer(sequence),
        ])
    }

    /// `emitWebhook` for an event of an order, whose merchant the order row names.
    static func emitWebhook(
        _ type: WebhookEventType, orderID: String, data: @autoclosure () -> [(String, WebhookField)], now: Date,
        _ connection: any SQLSession
    ) throws {
        guard
            let order = try connection.cached("SELECT merchant_id, number FROM orders WHERE id = ?")
                .firstRow([.text(orderID)], { (merchant: try $0.text("merchant_id"), number: try $0.text("number")) })
        else { return }
        try emitWebhook(
            type, merchantID: order.merchant,
            data: [("orderId", .string(orderID)), ("orderNumber", .string(order.number))] + data(), now: now,
            connection)
    }

    /// `order.status_changed` for an order that was created (`previous` nil) or changed status.
    static func emitStatusWebhook(order: Order, previous: OrderStatus?, now: Date, _ connection: any SQLSession)
        throws
    {
        try emitWebhook(
            .orderStatusChanged, merchantID: order.merchantID,
            data: [
                ("orderId", .string(order.id)), ("orderNumber", .string(order.number)),
                ("status", .string(order.status.rawValue)), ("previousStatus", .optional(previous?.rawValue)),
                ("cancelledAtStatus", .optional(order.cancelledAt?.rawValue)),
                ("estimatedArrival", .string(WebhookEventBody.iso8601(order.estimatedArrival))),
            ], now: now, connection)
    }

    /// `push.dead_lettered` for an outbox row given up on.
    static func emitDeadLetter(_ item: OutboxItem, reason: String, now: Date, _ connection: any SQLSession) throws {
        let target: [(String, WebhookField)] =
            switch item.target {
            case .activity(let activityID): [("kind", .string("update")), ("activityId", .string(activityID))]
            case .start(let customerID, let deviceID):
                [("kind", .string("start")), ("customerId", .string(customerID)), ("deviceId", .string(deviceID))]
            }
        try emitWebhook(
            .pushDeadLettered, orderID: item.orderID, data: target + [("reason", .string(reason))], now: now, connection
        )
    }

    static func queueDelivery(endpointID: String, eventID: String, now: Date, _ connection: any SQLSession) throws {
        try connection.cached(
            """
            INSERT INTO webhook_deliveries (endpoint_id, event_id, state, attempts, due_at, created_at, updated_at)
            VALUES (?, ?, 'pending', 0, ?, ?, ?)
            """
        ).run([
            .text(endpointID), .text(eventID), .integer(now.storageMilliseconds), .integer(now.storageMilliseconds),
            .integer(now.storageMilliseconds),
        ])
    }

    /// The `reason` of an `activity.ended` event for the reason the store keeps.
    static func endedReason(_ stored: String) -> (reason: String, detail: String?) {
        switch stored {
        case "user": ("user_dismissed", nil)
        case "ended": ("order_ended", nil)
        case "expired": ("expired", nil)
        case "erased": ("erased", nil)
        default: ("token_dead", stored)
        }
    }

    static func encode(_ endpoint: WebhookEndpointRecord) -> [DatabaseValue] {
        func time(_ date: Date?) -> DatabaseValue { date.map { .integer($0.storageMilliseconds) } ?? .null }
        return [
            .text(endpoint.id), .text(endpoint.merchantID), .text(endpoint.url), .text(endpoint.description),
            .text(endpoint.eventTypes.map(\.rawValue).joined(separator: " ")), .integer(endpoint.enabled ? 1 : 0),
            endpoint.disabledReason.map(DatabaseValue.text) ?? .null, .blob(endpoint.secretSealed),
            endpoint.previousSecretSealed.map(DatabaseValue.blob) ?? .null, time(endpoint.previousSecretExpiresAt),
            time(endpoint.failingSince), time(endpoint.lastDeliveredAt), time(endpoint.pausedUntil),
            time(endpoint.createdAt), time(endpoint.updatedAt),
        ]
    }

    static func decodeEndpoint(_ row: any DatabaseRow) throws -> WebhookEndpointRecord {
        func time(_ name: String) throws -> Date? { try row.optionalInt(name).map(Date.init(storageMilliseconds:)) }
        var endpoint = WebhookEndpointRecord(
            id: try row.text("id"), merchantID: try row.text("merchant_id"), url: try row.text("url"),
            description: try row.text("description"),
            eventTypes: try row.text("event_types").split(separator: " ").compactMap {
                WebhookEventType(rawValue: String($0))
            },
            enabled: try row.int("enabled") != 0, secretSealed: try row.blob("secret_sealed"),
            now: Date(storageMilliseconds: try row.int("created_at")))
        endpoint.disabledReason = try row.optionalText("disabled_reason")
        endpoint.previousSecretSealed = try row.optionalBlob("previous_secret_sealed")
        endpoint.previousSecretExpiresAt = try time("previous_secret_expires_at")
        endpoint.failingSince = try time("failing_since")
        endpoint.lastDeliveredAt = try time("last_delivered_at")
        endpoint.pausedUntil = try time("paused_until")
        endpoint.updatedAt = Date(storageMilliseconds: try row.int("updated_at"))
        return endpoint
    }

    static func decodeDelivery(_ row: any DatabaseRow, now: Date) throws -> WebhookDelivery {
        let endpoint = try decodeDeliveryEndpoint(row, now: now)
        return WebhookDelivery(
            source: .row(id: try row.int("id")), endpointID: try row.text("endpoint_id"),
            eventID: try row.text("event_id"),
            eventCreatedAt: Date(storageMilliseconds: try row.int("event_created_at")),
            attempts: Int(try row.int("attempts")), body: try row.blob("body"), url: endpoint.url,
            secretSealed: endpoint.secretSealed, previousSecretSealed: endpoint.previousSecretSealed,
            failingSince: endpoint.failingSince)
    }

    static func decodeReplayed(_ row: any DatabaseRow) throws -> ReplayedEvent {
        ReplayedEvent(
            id: try row.text("id"), type: try row.text("type"), createdAt: try row.int("created_at"),
            position: WebhookEventPosition(transaction: try row.int("txid"), sequence: try row.int("seq")))
    }

    static func decodeStateCount(_ row: any DatabaseRow) throws -> (String, Int, Int64?) {
        (try row.text("state"), Int(try row.int("n")), try row.optionalInt("oldest"))
    }
}
