import Foundation
import OrderDomain
import Storage
import TestSupport
import Testing

/// `StoreFixtures.setStatus` named an order that is not there.
struct MissingOrder: Error {
    let id: String
}

/// Orders and a fresh database file per test.
enum StoreFixtures {
    static let t0 = Date(timeIntervalSince1970: 1_796_212_800)

    static func database(_ directory: TemporaryDirectory) throws -> Database {
        try Database.open(StorageConfiguration(dataDirectory: directory.path))
    }

    static func newOrder(id: String = "o-1", number: String = "A-1001", customerID: String = "c-42") throws -> (
        Order, OrderEvent
    ) {
        let draft = OrderDraft(
            number: number, merchantName: "Pizza Roma", items: [.init(name: "Margherita", quantity: 2, price: 8.5)],
            customer: .init(id: customerID, name: "Ana", phone: "+49 30 1234567", locale: "de-DE"),
            address: "Hauptstr. 1", payment: .init(method: "card", brand: "visa", last4: "4242"),
            estimatedArrival: t0.addingTimeInterval(1800), note: "ring twice"
        )
        return try draft.validated(id: id, merchantID: "m-1", by: .merchant(id: "m-1"), at: t0)
    }

    /// Creates an order with `activities` registered activities.
    static func seed(_ database: any DeliveryStore, id: String = "o-1", activities: Int = 1) throws -> Order {
        let (order, event) = try newOrder(id: id, number: "N-\(id)")
        _ = try database.createOrder(order, event: event, trackingTokenHash: "hash-\(id)", now: t0)
        for index in 0..<activities {
            _ = try database.registerActivity(
                orderID: id, activityID: "act-\(index)", pushToken: "token-\(id)-\(index)", environment: .development,
                bundleID: "com.example.app", shown: nil, now: t0
            )
        }
        return order
    }

    /// Moves order `id` to `status` as an admin; the domain's refusal comes as the `OrderError` it is.
    static func setStatus(_ database: any DeliveryStore, _ id: String, _ status: OrderStatus, at: Date = t0) throws
        -> StoredChange
    {
        let stored = try database.change(orderID: id, now: at) { order throws(OrderError) in
            try order.applying(StatusChange(status: status), by: .admin, at: at)
        }
        guard let stored else { throw MissingOrder(id: id) }
        return stored
    }

    /// The id of order `id`'s newest event, read from the store's table (on PostgreSQL a change does
    /// not return it: `StoredChange.eventID`).
    static func newestEventID(_ database: any DeliveryStore, _ id: String) throws -> Int64? {
        let store = try #require(database as? any SQLStore)
        return try store.readSession { session in
            try session.cached("SELECT max(id) AS newest FROM order_events WHERE order_id = ?")
                .firstRow([.text(id)]) { try $0.optionalInt("newest") } ?? nil
        }
    }
}
