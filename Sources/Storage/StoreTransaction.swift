public import FoundationEssentials
public import OrderDomain

/// One write transaction as its caller sees it: rows and nothing else. The caller reads what it
/// needs (an order, locked until the transaction ends), decides with the pure domain, and writes the
/// outcome through the handle; the store applies no rule of the domain.
///
/// A handle is valid only inside the `DeliveryStore.write` body it was given to. What it writes
/// commits together when the body returns, and not at all when the body throws.
public protocol StoreTransaction {
    /// The order with its private fields (and items), locked against other writers until the
    /// transaction ends; `nil` when there is none. (SQLite: the writer holds the whole database;
    /// PostgreSQL: `SELECT … FOR UPDATE`.)
    func lockOrder(id: String) throws(StorageError) -> Order?

    /// Stores what a change can change of an order: status, the stage it was cancelled at, ETA,
    /// rider, and the time of the change.
    func updateOrder(_ order: Order) throws(StorageError)

    /// Appends `event` to its order's history (tagged with the HTTP request behind it).
    /// - Returns: the event's id, which the pushes it causes carry.
    func appendEvent(_ event: OrderEvent, requestID: String?) throws(StorageError) -> Int64

    /// Queues a push of the order's current state to each of its live activities; pending pushes of
    /// each activity are superseded (they coalesce into this one).
    /// - Returns: how many were queued.
    func queueActivityPushes(orderID: String, eventID: Int64?, now: Date, requestID: String?)
        throws(StorageError) -> Int
}

extension StoreTransaction {
    /// Writes what the domain decided about an order: for `applied`, the order row, its event, and a
    /// push to each live activity; `unchanged` writes nothing.
    public func record(_ outcome: ChangeOutcome, now: Date, requestID: String?) throws(StorageError) -> StoredChange {
        guard case .applied(let order, let event) = outcome else {
            return StoredChange(outcome: outcome, eventID: nil, queuedPushes: 0)
        }
        try updateOrder(order)
        let eventID = try appendEvent(event, requestID: requestID)
        let queued = try queueActivityPushes(orderID: order.id, eventID: eventID, now: now, requestID: requestID)
        return StoredChange(outcome: outcome, eventID: eventID, queuedPushes: queued)
    }
}
