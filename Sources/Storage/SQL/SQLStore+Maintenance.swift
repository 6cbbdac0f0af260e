public import FoundationEssentials

extension SQLStore {
    /// Deletes what the retention policy no longer keeps, in one transaction.
    @discardableResult
    public func prune(now: Date, policy: RetentionPolicy = RetentionPolicy()) throws(StorageError) -> PruneReport {
        try writeSQL { connection in
            func cutoff(_ age: TimeInterval) -> DatabaseValue {
                .integer(now.addingTimeInterval(-age).storageMilliseconds)
            }
            var report = PruneReport()
            try connection.plannedForValues("DELETE FROM activities WHERE ended_at IS NOT NULL AND ended_at < ?")
                .run([cutoff(policy.endedActivities)])
            report.activities = connection.changes
            try connection.plannedForValues("DELETE FROM push_log WHERE attempted_at < ?").run([cutoff(policy.pushLog)])
            report.pushLog = connection.changes
            try connection.plannedForValues(
                "DELETE FROM outbox WHERE state IN ('sent', 'superseded') AND updated_at < ?"
            )
            .run([cutoff(policy.finishedOutboxRows)])
            report.outbox = connection.changes
            try connection.plannedForValues("DELETE FROM outbox WHERE state = 'dead' AND updated_at < ?").run([
                cutoff(policy.deadLetters)
            ])
            report.outbox += connection.changes
            try connection.plannedForValues("DELETE FROM idempotency_keys WHERE expires_at < ?").run([cutoff(0)])
            report.idempotencyKeys = connection.changes
            let webhookCutoff = cutoff(policy.webhookHistory)
            // In the order the log was written: everything before its first attempt still kept. The
            // walk reads the rows it deletes and one more, where an index on the time would cost
            // every delivery a second B-tree change. A row older than one before it waits a pass.
            try connection.plannedForValues(
                """
                DELETE FROM webhook_attempts WHERE id < coalesce(
                    (SELECT id FROM webhook_attempts WHERE attempted_at >= ? ORDER BY id LIMIT 1),
                    (SELECT max(id) + 1 FROM webhook_attempts), 0)
                """
            ).run([webhookCutoff])
            report.webhookAttempts = connection.changes
            try connection.plannedForValues(
                """
                DELETE FROM webhook_deliveries WHERE state IN ('delivered', 'failed')
                  AND event_id IN (SELECT id FROM webhook_events WHERE created_at < ?)
                """
            ).run([webhookCutoff])
            try connection.plannedForValues(
                """
                DELETE FROM webhook_events WHERE created_at < ?
                  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.event_id = webhook_events.id)
                  AND NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e
                    WHERE e.merchant_id = webhook_events.merchant_id AND e.enabled = 1
                      AND (webhook_events.txid, webhook_events.seq) > (e.cursor_txid, e.cursor_seq))
                """
            ).run([webhookCutoff])
            report.webhookEvents = connection.changes
            report.erasedOrders = try StoreSQL.erasePersonalData(
                where: "status IN ('delivered', 'cancelled') AND updated_at < ?", [cutoff(policy.personalData)],
                now: now, connection)
            return report
        }
    }

    /// Erases the personal data of every order of one merchant's customer, open or ended (the right
    /// to erasure), removes the customer's push-to-start devices and ends the orders' activities;
    /// then has the engine drop the old copies of the erased rows (`discardErasedCopies`). Backups taken
    /// before keep what they held.
    public func erasePersonalData(merchantID: String, customerID: String, now: Date) throws(StorageError)
        -> ErasureReport
    {
        let report = try writeSQL { connection in
            var report = ErasureReport()
            report.orders = try StoreSQL.erasePersonalData(
                where: "merchant_id = ? AND customer_id = ?", [.text(merchantID), .text(customerID)], now: now,
                connection, includingErased: true)
            try connection.cached("DELETE FROM push_to_start_tokens WHERE merchant_id = ? AND customer_id = ?")
                .run([.text(merchantID), .text(customerID)])
            report.devices = connection.changes
            let activities = try connection.cached(
                """
                SELECT a.order_id, a.activity_id FROM activities AS a JOIN orders AS o ON o.id = a.order_id
                WHERE o.merchant_id = ? AND o.customer_id = ? AND a.ended_at IS NULL
                """
            ).rows([.text(merchantID), .text(customerID)]) { (try $0.text("order_id"), try $0.text("activity_id")) }
            for (orderID, activityID) in activities {
                report.activities +=
                    try StoreSQL.endActivity(
                        orderID: orderID, activityID: activityID, reason: "erased", now: now,
                        onlyIfRegisteredBefore: nil, connection) ? 1 : 0
            }
            return report
        }
        try discardErasedCopies()
        return report
    }
}

extension StoreSQL {
    /// The personal data of the orders `condition` selects: the customer's name, phone and address,
    /// the payment, the note, the destination, the rider's phone, and the free-text reasons of the
    /// order's events. Statuses, times, the merchant, the number, the items and the customer's id
    /// (the merchant's own pseudonym) stay: the order's history without whom it was for.
    /// - Returns: how many orders were erased.
    fileprivate static func erasePersonalData(
        where condition: String, _ arguments: [DatabaseValue], now: Date, _ connection: any SQLSession,
        includingErased: Bool = false
    ) throws -> Int {
        let selected = "(\(condition))" + (includingErased ? "" : " AND personal_data_erased_at IS NULL")
        try connection.plannedForValues(
            """
            UPDATE order_events SET reason = NULL
            WHERE reason IS NOT NULL AND order_id IN (SELECT id FROM orders WHERE \(selected))
            """
        ).run(arguments)
        try connection.plannedForValues(
            """
            UPDATE orders SET customer_name = '', customer_phone = '', address = '', payment_method = '',
                payment_brand = NULL, payment_last4 = NULL, note = NULL, rider_phone = NULL,
                destination_latitude = NULL, destination_longitude = NULL, personal_data_erased_at = ?
            WHERE \(selected)
            """
        ).run([.integer(now.storageMilliseconds)] + arguments)
        return connection.changes
    }
}
