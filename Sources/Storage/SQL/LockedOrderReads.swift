internal import OrderDomain

/// Orders read and locked for a batch of writes before its writes run, each handed to the first
/// `lockOrder` of its id in the transaction: on PostgreSQL one statement for the batch instead of
/// a wait on the server in each of its writes. A second `lockOrder` of the same order reads it
/// again, with what the transaction wrote to it since.
///
/// Valid only while every write of the batch that changes an order locks it first (`lockOrder`),
/// as the store's writes do; the batch forgets them when its transaction ends.
///
/// Not `Sendable`: it belongs to one connection, which serves one thread at a time.
package final class LockedOrderReads {
    private var orders: [String: Order] = [:]

    package init() {}

    /// Reads and locks the orders of `ids` that exist, in the order of their ids, so that batches
    /// locking some of the same orders wait for each other instead of deadlocking, and keeps them.
    package func readLocking(_ ids: [String], on session: any SQLSession) throws {
        for group in StoreSQL.paddedGroups(Array(Set(ids)).sorted()) {
            let read = try session.cached(
                """
                SELECT \(StoreSQL.orderColumns) FROM orders WHERE id IN (\(StoreSQL.placeholders(group.count)))
                ORDER BY id\(session.dialect.lockingRows)
                """
            ).rows(group.map(DatabaseValue.text), StoreSQL.decodeOrder)
            for order in read { orders[order.id] = order }
        }
    }

    /// The order read for `id`, handed out once.
    func take(_ id: String) -> Order? { orders.removeValue(forKey: id) }

    /// Forgets every order read (their transaction ended).
    package func forget() { orders.removeAll(keepingCapacity: true) }
}
