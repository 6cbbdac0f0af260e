import DeliveryActivityContract
public import FoundationEssentials
public import OrderDomain

extension SQLStore {
    /// Reads the orders, activities, push-to-start tokens and budget use of a claimed batch at once,
    /// a few statements for the whole batch (see `StoreSQL.paddedGroups`).
    public func pushBatchContext(
        for items: [OutboxItem], highPrioritySince since: Date, countingFor counted: (Order, ActivityRecord) -> Bool
    ) throws(StorageError) -> PushBatchContext {
        try readSession { connection in
            try StoreSQL.pushBatchContext(for: items, highPrioritySince: since, countingFor: counted, connection)
        }
    }

    /// `claimDue` and `pushBatchContext` in the claim's transaction. On SQLite a reader's page cache
    /// is emptied whenever another connection committed, so a read of the batch on its own fetched
    /// every page again (a tenth of deliveryd's CPU under load); the writer's cache holds the pages
    /// the batch's changes just wrote. On PostgreSQL it saves a round trip.
    public func claimBatch(
        owner: String, now: Date, lease: TimeInterval, limit: Int, highPrioritySince since: Date,
        countingFor counted: (Order, ActivityRecord) -> Bool
    ) throws(StorageError) -> ClaimedBatch {
        try writeSQL { connection in
            let items = try StoreSQL.claimDue(owner: owner, now: now, lease: lease, limit: limit, connection)
            guard !items.isEmpty else { return ClaimedBatch(items: [], context: PushBatchContext()) }
            return ClaimedBatch(
                items: items,
                context: try StoreSQL.pushBatchContext(
                    for: items, highPrioritySince: since, countingFor: counted, connection))
        }
    }

    /// Writes the outcome of a whole batch in one transaction: push log, outbox rows, what each
    /// activity was sent, and removed tokens. The rows of the common outcomes (an attempt logged, a
    /// push sent, what an activity shows) are written a few statements for the batch.
    /// - Returns: for each completion, whether its removal removed a token (a newer registration
    ///   or an earlier removal leaves nothing to remove).
    @discardableResult
    public func completePushes(_ completions: [PushCompletion], now: Date) throws(StorageError) -> [Bool] {
        try writeSQL { connection in
            try StoreSQL.insertPushLogs(completions.compactMap(\.attempt), connection)
            try StoreSQL.finishSent(
                completions.compactMap { $0.outcome == .sent ? $0.item : nil }, now: now, connection)
            var shown: [ActivityKey: ShownState] = [:]
            for completion in completions {
                switch completion.outcome {
                case .sent: break
                case .dead(let reason):
                    try StoreSQL.finish(completion.item.id, state: "dead", error: reason, now: now, connection)
                    try StoreSQL.emitDeadLetter(completion.item, reason: reason, now: now, connection)
                case .retry(let at, let error):
                    try StoreSQL.scheduleRetry(completion.item.id, at: at, error: error, now: now, connection)
                }
                if let sent = completion.sentState, case .activity(let activityID) = completion.item.target {
                    // A later completion of the same activity wins, as it would written row by row.
                    shown[ActivityKey(orderID: completion.item.orderID, activityID: activityID)] = sent
                }
            }
            try StoreSQL.recordSent(shown, connection)
            var removed: [Bool] = []
            removed.reserveCapacity(completions.count)
            for completion in completions {
                if let device = completion.startedDevice, let sent = completion.sentState {
                    try StoreSQL.startAndroidActivity(
                        device, orderID: completion.item.orderID, sent: sent, now: now, connection)
                }
                switch completion.removal {
                case .activity(let activityID, let reason, let before)?:
                    removed.append(
                        try StoreSQL.endActivity(
                            orderID: completion.item.orderID, activityID: activityID, reason: reason, now: now,
                            onlyIfRegisteredBefore: before, connection))
                case .pushToStart(let merchantID, let customerID, let deviceID, let before)?:
                    removed.append(
                        try StoreSQL.deletePushToStart(
                            DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID),
                            onlyIfRegisteredBefore: before, reason: "token_dead", now: now, connection))
                case nil:
                    removed.append(false)
                }
            }
            return removed
        }
    }
}

extension StoreSQL {
    /// `SQLStore.pushBatchContext` in the caller's transaction.
    static func pushBatchContext(
        for items: [OutboxItem], highPrioritySince since: Date, countingFor counted: (Order, ActivityRecord) -> Bool,
        _ connection: any SQLSession
    ) throws -> PushBatchContext {
        var context = PushBatchContext()
        for order in try orders(ids: Array(Set(items.map(\.orderID))), connection) {
            context.orders[order.id] = order
        }
        let wanted = Set(
            items.compactMap { item -> ActivityKey? in
                guard case .activity(let activityID) = item.target else { return nil }
                return ActivityKey(orderID: item.orderID, activityID: activityID)
            })
        for record in try activities(Array(wanted), connection) {
            context.activities[ActivityKey(orderID: record.orderID, activityID: record.activityID)] = record
        }
        let countedKeys = context.activities.filter { key, record in
            context.orders[key.orderID].map { counted($0, record) } ?? false
        }.keys
        context.highPriorityPushes = try highPriorityPushes(Array(countedKeys), since: since, connection)
        let androidTokens = Set(
            context.activities.values.filter { $0.platform == .android && !$0.pushToken.isEmpty }.map(\.pushToken))
        context.lastSentToToken = try newestAndroidMessages(toTokens: Array(androidTokens), connection)
        for item in items {
            guard case .start(let customerID, let deviceID) = item.target,
                // Devices belong to the order's merchant: another merchant's device never gets its start.
                let merchantID = context.orders[item.orderID]?.merchantID
            else { continue }
            let key = DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID)
            guard context.pushToStart[key] == nil, let record = try pushToStart(key, connection) else { continue }
            context.pushToStart[key] = record
        }
        return context
    }

    /// The orders with these ids as the pusher sees them (`decodeProjectedOrder`).
    static func orders(ids: [String], _ connection: any SQLSession) throws -> [Order] {
        try paddedGroups(ids).flatMap { group in
            try connection.cached(
                "SELECT \(projectedOrderColumns) FROM orders WHERE id IN (\(placeholders(group.count)))"
            ).rows(group.map(DatabaseValue.text), decodeProjectedOrder)
        }
    }

    /// What the pusher reads of an order: what the projection and the push planner use.
    static let projectedOrderColumns = """
        id, merchant_id, number, merchant_name, customer_id, customer_locale, status, cancelled_at_status,
        estimated_arrival, rider_id, rider_name, created_at, updated_at, ride_position_at, ride_remaining_m,
        ride_initial_m, ride_eta
        """

    /// An order without its items and personal data (the customer's name and phone, the address,
    /// payment, note, the rider's phone, the destination), which no push carries: read for every
    /// push, they were a third of the cost of reading its order, and the pusher now never holds them.
    static func decodeProjectedOrder(_ row: any DatabaseRow) throws -> Order {
        let id = try row.text("id")
        let statusText = try row.text("status")
        guard let status = OrderStatus(rawValue: statusText) else {
            throw StorageError("order \(id) has an unknown status \(statusText)")
        }
        return Order(
            id: id, merchantID: try row.text("merchant_id"), number: try row.text("number"),
            merchantName: try row.text("merchant_name"), items: [],
            customer: Customer(
                id: try row.text("customer_id"), name: "", phone: "", locale: try row.text("customer_locale")),
            address: "", payment: Payment(method: "", brand: nil, last4: nil), note: nil, status: status,
            cancelledAt: try row.optionalText("cancelled_at_status").flatMap(OrderStatus.init(rawValue:)),
            estimatedArrival: Date(storageMilliseconds: try row.int("estimated_arrival")),
            rider: try row.optionalText("rider_id").map { riderID in
                Rider(id: riderID, name: try row.text("rider_name"), phone: nil)
            },
            createdAt: Date(storageMilliseconds: try row.int("created_at")),
            updatedAt: Date(storageMilliseconds: try row.int("updated_at")),
            destination: nil, tracking: try decodeTracking(row))
    }

    /// These activities, ended or not. The keys are joined to the table, not listed in an `IN`: each is
    /// one primary-key lookup whatever the planner knows of the table (on a table not yet analyzed,
    /// PostgreSQL read a list of orders' activities by scanning all of them).
    static func activities(_ keys: [ActivityKey], _ connection: any SQLSession) throws -> [ActivityRecord] {
        try paddedGroups(keys).flatMap { group in
            try connection.cached(
                """
                SELECT \(activityColumns) FROM (VALUES \(rowPlaceholders(rows: group.count, row: "?, ?"))) AS wanted
                CROSS JOIN activities
                WHERE activities.order_id = wanted.column1 AND activities.activity_id = wanted.column2
                """
            ).rows(group.flatMap { [.text($0.orderID), .text($0.activityID)] }, decodeActivity)
        }
    }

    /// Priority-10 pushes APNs accepted since `since`, per activity. Counted one activity at a time by
    /// the push log's index of orders, the time tested on the order's few rows: with the time in the
    /// `WHERE`, PostgreSQL also read the index of times (its whole last hour) for every activity.
    static func highPriorityPushes(_ keys: [ActivityKey], since: Date, _ connection: any SQLSession) throws
        -> [ActivityKey: Int]
    {
        var accepted: [ActivityKey: Int] = [:]
        for group in paddedGroups(keys) {
            let rows = try connection.cached(
                """
                SELECT wanted.column1 AS order_id, wanted.column2 AS target_id, (
                    SELECT count(CASE WHEN attempted_at >= ? THEN 1 END) FROM push_log
                    WHERE push_log.order_id = wanted.column1 AND push_log.target_id = wanted.column2
                        AND priority = 10 AND http_status = 200
                ) AS accepted
                FROM (VALUES \(rowPlaceholders(rows: group.count, row: "?, ?"))) AS wanted
                """
            ).rows([.integer(since.storageMilliseconds)] + group.flatMap { [.text($0.orderID), .text($0.activityID)] })
            {
                row in
                (
                    ActivityKey(orderID: try row.text("order_id"), activityID: try row.text("target_id")),
                    Int(try row.int("accepted"))
                )
            }
            for (key, count) in rows { accepted[key] = count }
        }
        return accepted
    }

    /// For each Android FCM token, the newest message any live activity with it was sent.
    static func newestAndroidMessages(toTokens tokens: [String], _ connection: any SQLSession) throws
        -> [String: Date]
    {
        var newest: [String: Date] = [:]
        for group in paddedGroups(tokens) {
            let rows = try connection.cached(
                """
                SELECT wanted.column1 AS push_token, (
                    SELECT max(last_sent_timestamp) FROM activities
                    WHERE activities.push_token = wanted.column1 AND platform = 'android' AND ended_at IS NULL
                ) AS newest
                FROM (VALUES \(rowPlaceholders(rows: group.count, row: "?"))) AS wanted
                """
            ).rows(group.map(DatabaseValue.text)) { row in
                (try row.text("push_token"), try row.optionalInt("newest").map(Date.init(storageMilliseconds:)))
            }
            for case (let token, let date?) in rows { newest[token] = date }
        }
        return newest
    }

    static func insertPushLogs(_ attempts: [PushAttempt], _ connection: any SQLSession) throws {
        for group in exactGroups(attempts) {
            try connection.cached(
                """
                INSERT INTO push_log (order_id, target_id, event, priority, http_status, reason, apns_id, latency_ms,
                    attempted_at, request_id, content_state, platform)
                VALUES \(rowPlaceholders(rows: group.count, row: placeholders(12)))
                """
            ).run(group.flatMap(pushLogValues))
        }
    }

    /// Outbox rows whose push went out: they leave the queue. An update's row is deleted: its attempt
    /// is in the push log, and nothing reads a sent update again, so keeping it a day cost a move
    /// into the index of closed rows and a delete by the retention pass, for every push. A start's
    /// row is kept as sent: a start that no activity followed is found by it
    /// (`markStalledStarts`), and a device gets an order's start once.
    static func finishSent(_ items: [OutboxItem], now: Date, _ connection: any SQLSession) throws {
        let updates = items.compactMap { item -> Int64? in
            guard case .activity = item.target else { return nil }
            return item.id
        }
        for group in paddedGroups(updates) {
            try connection.cached("DELETE FROM outbox WHERE id IN (\(placeholders(group.count)))")
                .run(group.map(DatabaseValue.integer))
        }
        let starts = items.compactMap { item -> Int64? in
            guard case .start = item.target else { return nil }
            return item.id
        }
        for group in paddedGroups(starts) {
            try connection.cached(
                """
                UPDATE outbox SET state = 'sent', last_error = NULL, lease_owner = NULL, lease_until = NULL,
                    updated_at = ?
                WHERE id IN (\(placeholders(group.count)))
                """
            ).run([.integer(now.storageMilliseconds)] + group.map(DatabaseValue.integer))
        }
    }

    /// Records what each activity was last sent: for de-duplication and monotonic timestamps. A
    /// `VALUES` list's columns are named `column1`… in both engines; PostgreSQL types them from the
    /// first row, hence the cast.
    static func recordSent(_ shown: [ActivityKey: ShownState], _ connection: any SQLSession) throws {
        for group in paddedGroups(Array(shown)) {
            try connection.cached(
                """
                UPDATE activities SET last_sent_status = sent.column3, last_sent_fingerprint = sent.column4,
                    last_sent_timestamp = sent.column5
                FROM (VALUES \(rowPlaceholders(rows: group.count, row: "?, ?, ?, ?, CAST(? AS BIGINT)"))) AS sent
                WHERE activities.order_id = sent.column1 AND activities.activity_id = sent.column2
                """
            ).run(
                group.flatMap { key, state -> [DatabaseValue] in
                    [
                        .text(key.orderID), .text(key.activityID), .text(state.status.rawValue),
                        .text(state.fingerprint), state.timestamp.map { .integer($0.storageMilliseconds) } ?? .null,
                    ]
                })
        }
    }
}

extension StoreSQL {
    /// Makes the Android device a start reached an activity of the order, showing what the start
    /// carried. One update is queued with it: a change committed while the start was on the wire
    /// queued nothing for this activity, and the planner skips the update if nothing changed.
    static func startAndroidActivity(
        _ device: PushCompletion.StartedDevice, orderID: String, sent: ShownState, now: Date,
        _ connection: any SQLSession
    ) throws {
        try connection.cached(
            """
            INSERT INTO activities (order_id, activity_id, push_token, environment, bundle_id, platform, started_at,
                registered_at, last_sent_status, last_sent_fingerprint, last_sent_timestamp)
            VALUES (?, ?, ?, 'production', ?, 'android', ?, ?, ?, ?, ?)
            ON CONFLICT (order_id, activity_id) DO NOTHING
            """
        ).run([
            .text(orderID), .text(device.activityID), .text(device.pushToken), .text(device.project),
            .integer(now.storageMilliseconds), .integer(now.storageMilliseconds), .text(sent.status.rawValue),
            .text(sent.fingerprint), sent.timestamp.map { .integer($0.storageMilliseconds) } ?? .null,
        ])
        guard connection.changes > 0 else { return }
        try enqueue(
            orderID: orderID, eventID: nil, target: .activity(activityID: device.activityID), now: now,
            requestID: nil, connection)
        try emitWebhook(
            .activityStarted, orderID: orderID,
            data: [
                ("activityId", .string(device.activityID)), ("environment", .string("production")),
                ("platform", .string("android")),
            ], now: now, connection)
    }
}
