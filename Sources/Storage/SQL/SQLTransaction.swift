import DeliveryActivityContract
internal import FoundationEssentials
internal import OrderDomain

/// `StoreTransaction` on a `SQLStore`'s write session, inside the transaction its store opened
/// (SQLite's group commit, or a PostgreSQL transaction of its own).
struct SQLTransaction: StoreTransaction {
    let connection: any SQLSession

    func lockOrder(id: String) throws(StorageError) -> Order? {
        if let read = connection.lockedOrderReads?.take(id) { return read }
        return try sql {
            try connection.cached(
                "SELECT \(StoreSQL.orderColumns) FROM orders WHERE id = ?\(connection.dialect.lockingRows)"
            )
            .firstRow([.text(id)], StoreSQL.decodeOrder)
        }
    }

    func updateOrder(_ order: Order, from previous: Order) throws(StorageError) {
        var changed = OrderColumns()
        var values: [DatabaseValue] = []
        values.reserveCapacity(8)
        if order.status != previous.status {
            changed.insert(.status)
            values.append(.text(order.status.rawValue))
        }
        if order.cancelledAt != previous.cancelledAt {
            changed.insert(.cancelledAt)
            values.append(order.cancelledAt.map { .text($0.rawValue) } ?? .null)
        }
        if order.estimatedArrival != previous.estimatedArrival {
            changed.insert(.estimatedArrival)
            values.append(.integer(order.estimatedArrival.storageMilliseconds))
        }
        if order.rider != previous.rider {
            changed.insert(.rider)
            values += [
                order.rider.map { .text($0.id) } ?? .null, order.rider.map { .text($0.name) } ?? .null,
                order.rider?.phone.map(DatabaseValue.text) ?? .null,
            ]
        }
        values += [.integer(order.updatedAt.storageMilliseconds), .text(order.id)]
        try sql {
            try connection.send(
                OrderColumns.updates[Int(changed.rawValue)], values,
                expected: ExpectedChanges(rows: 1, else: StorageError("order \(order.id) is not stored")))
        }
    }

    func appendEvent(_ event: OrderEvent, requestID: String?) throws(StorageError) {
        try sql {
            try connection.send(
                StoreSQL.insertEvent, StoreSQL.eventValues(event, requestID: requestID),
                expected: ExpectedChanges(
                    rows: 1, else: StorageError("the event of order \(event.orderID) was not inserted")))
        }
    }

    func queueActivityPushes(orderID: String, carryingLatestEvent: Bool, now: Date, requestID: String?)
        throws(StorageError) -> (count: Int?, eventID: Int64?)
    {
        try sql {
            guard connection.dialect.countsQueuedPushes else {
                try StoreSQL.enqueueToLiveActivitiesWithoutWaiting(
                    orderID: orderID, carryingLatestEvent: carryingLatestEvent, now: now, requestID: requestID,
                    connection)
                return (nil, nil)
            }
            let queued = try StoreSQL.enqueueToLiveActivities(
                orderID: orderID, carryingLatestEvent: carryingLatestEvent, now: now, requestID: requestID,
                connection)
            return (queued.count, queued.eventID)
        }
    }

    func createOrder(
        _ order: Order, event: OrderEvent, trackingTokenHash: String?, now: Date, startsAt: Date?, requestID: String?
    ) throws(StorageError) -> CreateOrderResult {
        try sql {
            try connection.cached(StoreSQL.insertOrder + " ON CONFLICT (merchant_id, number) DO NOTHING").run(
                StoreSQL.encode(order) + [trackingTokenHash.map(DatabaseValue.text) ?? .null])
            guard connection.changes == 1 else {
                let existing = try connection.cached(
                    "SELECT \(StoreSQL.orderColumns) FROM orders WHERE merchant_id = ? AND number = ?"
                ).firstRow([.text(order.merchantID), .text(order.number)], StoreSQL.decodeOrder)
                guard let existing else { throw StorageError("order \(order.number) neither inserted nor found") }
                return .existing(existing)
            }
            let eventID = try StoreSQL.insert(event, requestID: requestID, connection)
            try StoreSQL.emitStatusWebhook(order: order, previous: nil, now: now, connection)
            // Only this merchant's devices of this customer: customer ids are the merchant's own names.
            let devices = try connection.cached(
                "SELECT device_id FROM push_to_start_tokens WHERE merchant_id = ? AND customer_id = ?"
            ).rows([.text(order.merchantID), .text(order.customer.id)]) { try $0.text("device_id") }
            for device in devices {
                try StoreSQL.enqueue(
                    orderID: order.id, eventID: eventID,
                    target: .start(customerID: order.customer.id, deviceID: device),
                    now: now, dueAt: startsAt, requestID: requestID, connection
                )
            }
            return .created(order, eventID: eventID, queuedStarts: devices.count)
        }
    }

    func scheduleStarts(orderID: String, at time: Date, now: Date) throws(StorageError) -> Int? {
        try sql {
            try connection.send(
                """
                UPDATE outbox SET due_at = ?, updated_at = ?
                WHERE order_id = ? AND kind = 'start' AND \(StoreSQL.pendingRows)
                  AND due_at != ?
                """,
                [
                    .integer(max(time, now).storageMilliseconds), .integer(now.storageMilliseconds), .text(orderID),
                    .integer(max(time, now).storageMilliseconds),
                ])
            return connection.dialect.countsQueuedPushes ? connection.changes : nil
        }
    }

    func startNow(_ order: Order, now: Date, requestID: String?) throws(StorageError) -> Int {
        try sql {
            let devices = try connection.cached(
                "SELECT device_id FROM push_to_start_tokens WHERE merchant_id = ? AND customer_id = ?"
            ).rows([.text(order.merchantID), .text(order.customer.id)]) { try $0.text("device_id") }
            var queued = 0
            for device in devices {
                let target = OutboxTarget.start(customerID: order.customer.id, deviceID: device)
                // A device that was sent this order's start (or is being sent it) has its activity:
                // another start would put a second one on its lock screen.
                let started =
                    try connection.cached(
                        """
                        SELECT count(*) AS started FROM outbox
                        WHERE order_id = ? AND kind = 'start' AND target_id = ? AND state IN ('sending', 'sent')
                        """
                    ).firstRow([.text(order.id), .text(target.targetID)]) { try $0.int("started") } ?? 0
                guard started == 0 else { continue }
                try StoreSQL.enqueue(
                    orderID: order.id, eventID: nil, target: target, now: now, requestID: requestID, connection)
                queued += 1
            }
            return queued
        }
    }

    func registerActivity(
        orderID: String, activityID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform, shown: ShownState?, liveLimit: Int, now: Date, requestID: String?
    ) throws(StorageError) -> ActivityRegistration {
        try sql {
            // The cap counts the order's live activities: registrations of one order take turns on
            // its row, so that two nodes registering at once cannot both see room for one more.
            try connection.cached("SELECT id FROM orders WHERE id = ?\(connection.dialect.lockingRows)")
                .run([.text(orderID)])
            let previous = try StoreSQL.activity(orderID: orderID, activityID: activityID, connection)
            if previous?.endedAt != nil || previous == nil {
                let live =
                    try connection.cached(
                        "SELECT count(*) AS live FROM activities WHERE order_id = ? AND ended_at IS NULL"
                    ).firstRow([.text(orderID)]) { Int(try $0.int("live")) } ?? 0
                if live >= liveLimit { throw LimitReached(what: "live activities per order", limit: liveLimit) }
            }
            try connection.cached(
                """
                INSERT INTO activities (order_id, activity_id, push_token, environment, bundle_id, platform,
                    started_at, registered_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (order_id, activity_id) DO UPDATE SET
                    push_token = excluded.push_token, environment = excluded.environment,
                    bundle_id = excluded.bundle_id, platform = excluded.platform,
                    registered_at = excluded.registered_at, ended_at = NULL, ended_reason = NULL
                """
            ).run([
                .text(orderID), .text(activityID), .text(pushToken), .text(environment.rawValue), .text(bundleID),
                .text(platform.rawValue), .integer(now.storageMilliseconds), .integer(now.storageMilliseconds),
            ])
            if let shown {
                try connection.cached(
                    """
                    UPDATE activities SET last_sent_status = ?, last_sent_fingerprint = ?
                    WHERE order_id = ? AND activity_id = ?
                    """
                ).run([.text(shown.status.rawValue), .text(shown.fingerprint), .text(orderID), .text(activityID)])
            }
            try StoreSQL.enqueue(
                orderID: orderID, eventID: nil, target: .activity(activityID: activityID), now: now,
                requestID: requestID, connection)
            if previous == nil || previous?.endedAt != nil {
                try StoreSQL.emitWebhook(
                    .activityStarted, orderID: orderID,
                    data: [
                        ("activityId", .string(activityID)), ("environment", .string(environment.rawValue)),
                        ("platform", .string(platform.rawValue)),
                    ],
                    now: now, connection)
            }
            guard let record = try StoreSQL.activity(orderID: orderID, activityID: activityID, connection) else {
                throw StorageError("activity \(activityID) vanished after registration")
            }
            return ActivityRegistration(record: record, rotated: previous != nil, queuedPushes: 1)
        }
    }

    func registerPushToStart(
        _ device: DeviceKey, credentialID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform, deviceLimit: Int, now: Date
    ) throws(StorageError) {
        try sql {
            // The cap counts one customer's devices, which have no row of their own to lock.
            if let lock = connection.dialect.lockingKey {
                try connection.cached(lock).run([.text("push-to-start \(device.merchantID) \(device.customerID)")])
            }
            if try StoreSQL.pushToStart(device, connection) == nil {
                let devices =
                    try connection.cached(
                        "SELECT count(*) AS devices FROM push_to_start_tokens WHERE merchant_id = ? AND customer_id = ?"
                    ).firstRow([.text(device.merchantID), .text(device.customerID)]) { Int(try $0.int("devices")) } ?? 0
                if devices >= deviceLimit {
                    throw LimitReached(what: "push-to-start devices per customer", limit: deviceLimit)
                }
            }
            // The phone is this person's now: no earlier registration of its token for this app,
            // whoever made it, may start someone else's order on it.
            let replaced = try connection.cached(
                """
                DELETE FROM push_to_start_tokens WHERE bundle_id = ? AND push_token = ?
                    AND NOT (merchant_id = ? AND customer_id = ? AND device_id = ?)
                RETURNING merchant_id, customer_id, device_id
                """
            ).rows([
                .text(bundleID), .text(pushToken), .text(device.merchantID), .text(device.customerID),
                .text(device.deviceID),
            ]) {
                DeviceKey(
                    merchantID: try $0.text("merchant_id"), customerID: try $0.text("customer_id"),
                    deviceID: try $0.text("device_id"))
            }
            for other in replaced {
                try StoreSQL.emitPushToStartRemoved(other, reason: "registered_elsewhere", now: now, connection)
            }
            try connection.cached(
                """
                INSERT INTO push_to_start_tokens (merchant_id, customer_id, device_id, credential_id, push_token,
                    environment, bundle_id, platform, registered_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (merchant_id, customer_id, device_id) DO UPDATE SET push_token = excluded.push_token,
                    credential_id = excluded.credential_id, environment = excluded.environment,
                    bundle_id = excluded.bundle_id, platform = excluded.platform,
                    registered_at = excluded.registered_at
                """
            ).run([
                .text(device.merchantID), .text(device.customerID), .text(device.deviceID), .text(credentialID),
                .text(pushToken), .text(environment.rawValue), .text(bundleID), .text(platform.rawValue),
                .integer(now.storageMilliseconds),
            ])
        }
    }

    func queueStatusWebhook(order: Order, event: OrderEvent, now: Date) throws(StorageError) {
        try sql { try StoreSQL.emitStatusWebhook(order: order, previous: event.from, now: now, connection) }
    }

    func replayDeadLetters(ids: [Int64]?, now: Date) throws(StorageError) -> Int {
        try sql {
            let millis = now.storageMilliseconds
            if let ids {
                var replayed = 0
                for id in ids {
                    try connection.cached(
                        "UPDATE outbox SET state = 'pending', due_at = ?, attempts = 0, updated_at = ? WHERE id = ? AND state = 'dead'"
                    ).run([.integer(millis), .integer(millis), .integer(id)])
                    replayed += connection.changes
                }
                return replayed
            }
            try connection.cached(
                "UPDATE outbox SET state = 'pending', due_at = ?, attempts = 0, updated_at = ? WHERE state = 'dead'"
            ).run([.integer(millis), .integer(millis)])
            return connection.changes
        }
    }

    func claimIdempotencyKey(principal: String, key: String, requestHash: String, expiresAt: Date, now: Date)
        throws(StorageError) -> IdempotencyClaim
    {
        try sql {
            try connection.cached(
                """
                INSERT INTO idempotency_keys (principal, key, request_hash, response_code, response_body, expires_at)
                VALUES (?, ?, ?, 0, ?, ?)
                ON CONFLICT (principal, key) DO UPDATE SET request_hash = excluded.request_hash,
                    response_code = 0, response_body = excluded.response_body, expires_at = excluded.expires_at
                WHERE idempotency_keys.expires_at < ?
                """
            ).run([
                .text(principal), .text(key), .text(requestHash), .blob([]), .integer(expiresAt.storageMilliseconds),
                .integer(now.storageMilliseconds),
            ])
            if connection.changes > 0 { return .claimed }
            let holder = try connection.cached(
                "SELECT request_hash, response_code, response_body FROM idempotency_keys WHERE principal = ? AND key = ?"
            ).firstRow([.text(principal), .text(key)], StoreSQL.decodeIdempotentResponse)
            guard let holder else { throw StorageError("idempotency key \(key) neither inserted nor found") }
            return .taken(holder)
        }
    }

    func saveIdempotentResponse(principal: String, key: String, response: IdempotentResponse)
        throws(StorageError)
    {
        try sql {
            try connection.cached(
                """
                UPDATE idempotency_keys SET response_code = ?, response_body = ?
                WHERE principal = ? AND key = ? AND request_hash = ?
                """
            ).run([
                .integer(Int64(response.status)), .blob(response.body), .text(principal), .text(key),
                .text(response.requestHash),
            ])
            guard connection.changes == 1 else {
                throw StorageError("idempotency key \(key) was not claimed by this request")
            }
        }
    }

    func releaseIdempotencyKey(principal: String, key: String) throws(StorageError) {
        try sql {
            try connection.cached("DELETE FROM idempotency_keys WHERE principal = ? AND key = ? AND response_code = 0")
                .run([.text(principal), .text(key)])
        }
    }

    /// Runs SQL calls, their errors as `StorageError`.
    private func sql<T>(_ body: () throws -> T) throws(StorageError) -> T {
        do {
            return try body()
        } catch {
            throw StorageError(error, context: "write failed")
        }
    }
}

/// The columns of an order a change may set. An UPDATE names only those that changed: SQLite
/// rewrites the entries of every index on a column it sets, changed or not (the rider's columns
/// are in three indexes, the status in three).
private struct OrderColumns: OptionSet {
    let rawValue: UInt8

    static let status = OrderColumns(rawValue: 1)
    static let cancelledAt = OrderColumns(rawValue: 2)
    static let estimatedArrival = OrderColumns(rawValue: 4)
    static let rider = OrderColumns(rawValue: 8)

    /// The UPDATE for each set of changed columns (its raw value the index), the time of the change
    /// always set: sixteen texts, each prepared once per connection when first used.
    static let updates: [String] = (0..<16).map { mask in
        let changed = OrderColumns(rawValue: UInt8(mask))
        var columns: [String] = []
        if changed.contains(.status) { columns.append("status = ?") }
        if changed.contains(.cancelledAt) { columns.append("cancelled_at_status = ?") }
        if changed.contains(.estimatedArrival) { columns.append("estimated_arrival = ?") }
        if changed.contains(.rider) { columns += ["rider_id = ?", "rider_name = ?", "rider_phone = ?"] }
        columns.append("updated_at = ?")
        return "UPDATE orders SET \(columns.joined(separator: ", ")) WHERE id = ?"
    }
}
