public import FoundationEssentials
import OrderDomain

extension SQLStore {
    /// Ends an activity: no more pushes, its token is dropped and its pending rows are superseded.
    /// - Parameters:
    ///   - reason: why (`user`, `ended`, `Unregistered`, `BadDeviceToken`, `expired`, …), kept for metrics.
    ///   - onlyIfRegisteredBefore: for a 410, the time APNs says the token stopped being valid; a token
    ///     registered after it is kept.
    /// - Returns: whether the activity was ended by this call.
    @discardableResult
    public func endActivity(
        orderID: String, activityID: String, reason: String, now: Date, onlyIfRegisteredBefore: Date? = nil
    ) throws(StorageError) -> Bool {
        try writeSQL { connection in
            try StoreSQL.endActivity(
                orderID: orderID, activityID: activityID, reason: reason, now: now,
                onlyIfRegisteredBefore: onlyIfRegisteredBefore, connection)
        }
    }

    /// One activity of an order, ended or not.
    public func activity(orderID: String, activityID: String) throws(StorageError) -> ActivityRecord? {
        try readSession { connection in try StoreSQL.activity(orderID: orderID, activityID: activityID, connection) }
    }

    /// The activities of an order that still receive pushes.
    public func liveActivities(orderID: String) throws(StorageError) -> [ActivityRecord] {
        try readSession { connection in
            try connection.cached(
                "SELECT \(StoreSQL.activityColumns) FROM activities WHERE order_id = ? AND ended_at IS NULL ORDER BY activity_id"
            ).rows([.text(orderID)], StoreSQL.decodeActivity)
        }
    }

    /// Removes a device's push-to-start token (the customer signed out on it); returns whether it had one.
    @discardableResult
    public func removePushToStart(_ device: DeviceKey, now: Date) throws(StorageError) -> Bool {
        try writeSQL { connection in
            try StoreSQL.deletePushToStart(
                device, onlyIfRegisteredBefore: nil, reason: "signed_out", now: now, connection)
        }
    }

    /// A device's push-to-start token, if it has one.
    public func pushToStart(_ device: DeviceKey) throws(StorageError) -> PushToStartRecord? {
        try readSession { connection in try StoreSQL.pushToStart(device, connection) }
    }
}

extension StoreSQL {
    static let activityColumns = """
        order_id, activity_id, push_token, environment, bundle_id, platform, started_at, registered_at, ended_at,
        ended_reason, last_sent_status, last_sent_fingerprint, last_sent_timestamp
        """

    static func endActivity(
        orderID: String, activityID: String, reason: String, now: Date, onlyIfRegisteredBefore: Date?,
        _ connection: any SQLSession
    ) throws -> Bool {
        try connection.cached(
            """
            UPDATE activities SET ended_at = ?, ended_reason = ?, push_token = ''
            WHERE order_id = ? AND activity_id = ? AND ended_at IS NULL AND registered_at <= ?
            """
        ).run([
            .integer(now.storageMilliseconds), .text(reason), .text(orderID), .text(activityID),
            .integer((onlyIfRegisteredBefore ?? .distantFuture).storageMilliseconds),
        ])
        guard connection.changes > 0 else { return false }
        try connection.cached(
            """
            UPDATE outbox SET state = 'superseded', updated_at = ?
            WHERE order_id = ? AND kind = 'activity' AND target_id = ? AND state IN ('pending', 'sending')
            """
        ).run([.integer(now.storageMilliseconds), .text(orderID), .text(activityID)])
        let ended = endedReason(reason)
        try emitWebhook(
            .activityEnded, orderID: orderID,
            data: [
                ("activityId", .string(activityID)), ("reason", .string(ended.reason)),
                ("apnsReason", .optional(ended.detail)),
            ], now: now, connection)
        return true
    }

    static func pushToStart(_ device: DeviceKey, _ connection: any SQLSession) throws -> PushToStartRecord? {
        try connection.cached(
            """
            SELECT merchant_id, customer_id, device_id, credential_id, push_token, environment, bundle_id, platform,
                registered_at
            FROM push_to_start_tokens WHERE merchant_id = ? AND customer_id = ? AND device_id = ?
            """
        ).firstRow([.text(device.merchantID), .text(device.customerID), .text(device.deviceID)]) { row in
            PushToStartRecord(
                merchantID: try row.text("merchant_id"), customerID: try row.text("customer_id"),
                deviceID: try row.text("device_id"), credentialID: try row.text("credential_id"),
                pushToken: try row.text("push_token"), environment: try row.value("environment"),
                bundleID: try row.text("bundle_id"), platform: try row.value("platform"),
                registeredAt: Date(storageMilliseconds: try row.int("registered_at"))
            )
        }
    }

    /// Removes a dead push-to-start token unless it was registered again after `onlyIfRegisteredBefore`.
    @discardableResult
    /// Removes a device's push-to-start token and tells the merchant why (`token_dead`, `signed_out`).
    static func deletePushToStart(
        _ device: DeviceKey, onlyIfRegisteredBefore: Date?, reason: String, now: Date, _ connection: any SQLSession
    ) throws -> Bool {
        try connection.cached(
            """
            DELETE FROM push_to_start_tokens
            WHERE merchant_id = ? AND customer_id = ? AND device_id = ? AND registered_at <= ?
            """
        ).run([
            .text(device.merchantID), .text(device.customerID), .text(device.deviceID),
            .integer((onlyIfRegisteredBefore ?? .distantFuture).storageMilliseconds),
        ])
        guard connection.changes > 0 else { return false }
        try emitPushToStartRemoved(device, reason: reason, now: now, connection)
        return true
    }

    static func emitPushToStartRemoved(_ device: DeviceKey, reason: String, now: Date, _ connection: any SQLSession)
        throws
    {
        try emitWebhook(
            .pushToStartRemoved, merchantID: device.merchantID,
            data: [
                ("customerId", .string(device.customerID)), ("deviceId", .string(device.deviceID)),
                ("reason", .string(reason)),
            ], now: now, connection)
    }

    static func activity(orderID: String, activityID: String, _ connection: any SQLSession) throws -> ActivityRecord? {
        try connection.cached("SELECT \(activityColumns) FROM activities WHERE order_id = ? AND activity_id = ?")
            .firstRow([.text(orderID), .text(activityID)], decodeActivity)
    }

    static func decodeActivity(_ row: any DatabaseRow) throws -> ActivityRecord {
        ActivityRecord(
            orderID: try row.text("order_id"), activityID: try row.text("activity_id"),
            pushToken: try row.text("push_token"), environment: try row.value("environment"),
            bundleID: try row.text("bundle_id"), platform: try row.value("platform"),
            startedAt: Date(storageMilliseconds: try row.int("started_at")),
            registeredAt: Date(storageMilliseconds: try row.int("registered_at")),
            endedAt: try row.optionalInt("ended_at").map(Date.init(storageMilliseconds:)),
            endedReason: try row.optionalText("ended_reason"),
            shown: try row.optionalValue("last_sent_status").map { (status: OrderStatus) in
                ShownState(
                    status: status, fingerprint: try row.text("last_sent_fingerprint"),
                    timestamp: try row.optionalInt("last_sent_timestamp").map(Date.init(storageMilliseconds:)))
            }
        )
    }
}
