package import FoundationEssentials
package import OrderDomain
package import Storage

extension DeliveryStore {
    /// Applies `change` to order `orderID` in one transaction, as the API does: the order locked,
    /// the domain's decision, its outcome written. For tests and the crash writer.
    /// - Returns: `nil` when there is no such order.
    /// - Throws: `change`'s `OrderError` as it is, or `StorageError`.
    package func change(
        orderID: String, now: Date, requestID: String? = nil, _ change: (Order) throws(OrderError) -> ChangeOutcome
    ) throws -> StoredChange? {
        try write { transaction in
            guard let current = try transaction.lockOrder(id: orderID) else { return nil }
            return try transaction.record(try change(current), of: current, now: now, requestID: requestID)
        }
    }
}
