public import FoundationEssentials
public import OrderDomain

extension Database {
    /// Runs `body` in one write transaction and returns its value once the transaction committed.
    ///
    /// Writes of concurrent callers share one commit (group commit, see `GroupCommitter`), each in
    /// its own savepoint, so a body that throws undoes only its own writes. Called inside
    /// `atomically`, it joins that transaction.
    /// - Throws: what `body` threw, as it is (an `OrderError` refusal stays one), or `StorageError`.
    public func write<T>(_ body: (any StoreTransaction) throws -> T) throws -> T {
        try writeConnectionPassingThrough { connection in
            try body(SQLiteTransaction(connection: connection))
        }
    }
}

/// `StoreTransaction` on the SQLite writer connection, inside the group commit's transaction.
struct SQLiteTransaction: StoreTransaction {
    let connection: SQLiteConnection

    func lockOrder(id: String) throws(StorageError) -> Order? {
        try sqlite {
            try connection.cached("SELECT \(Database.orderColumns) FROM orders WHERE id = ?")
                .firstRow([.text(id)], Database.decodeOrder)
        }
    }

    func updateOrder(_ order: Order) throws(StorageError) {
        try sqlite {
            try connection.cached(
                """
                UPDATE orders SET status = ?, cancelled_at_status = ?, estimated_arrival = ?, rider_id = ?,
                    rider_name = ?, rider_phone = ?, updated_at = ? WHERE id = ?
                """
            ).run([
                .text(order.status.rawValue), order.cancelledAt.map { .text($0.rawValue) } ?? .null,
                .integer(order.estimatedArrival.storageMilliseconds), order.rider.map { .text($0.id) } ?? .null,
                order.rider.map { .text($0.name) } ?? .null, order.rider?.phone.map(SQLiteValue.text) ?? .null,
                .integer(order.updatedAt.storageMilliseconds), .text(order.id),
            ])
            guard connection.changes == 1 else { throw StorageError("order \(order.id) is not stored") }
        }
    }

    func appendEvent(_ event: OrderEvent, requestID: String?) throws(StorageError) -> Int64 {
        try sqlite { try Database.insert(event, requestID: requestID, connection) }
    }

    func queueActivityPushes(orderID: String, eventID: Int64?, now: Date, requestID: String?)
        throws(StorageError) -> Int
    {
        try sqlite {
            let activities = try Database.liveActivityIDs(orderID: orderID, connection)
            for activity in activities {
                try Database.enqueue(
                    orderID: orderID, eventID: eventID, target: .activity(activityID: activity), now: now,
                    requestID: requestID, connection)
            }
            return activities.count
        }
    }

    /// Runs SQLite calls, their errors as `StorageError`.
    private func sqlite<T>(_ body: () throws -> T) throws(StorageError) -> T {
        do {
            return try body()
        } catch {
            throw StorageError(error, context: "write failed")
        }
    }
}
