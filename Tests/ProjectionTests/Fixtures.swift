import DeliveryActivityContract
import FoundationEssentials
import OrderDomain

/// Orders and times shared by the projection tests; fixed, so golden bytes never drift.
enum Fixtures {
    /// 2026-12-02T12:00:00Z: Unix 1796212800, reference-date 817905600.
    static let placedAt = Date(timeIntervalSince1970: 1_796_212_800)
    /// Ten minutes later, when the pushes under test are planned.
    static let now = placedAt.addingTimeInterval(600)

    /// An activity showing an earlier state of `status`: its fingerprint matches no state planned here.
    static func shown(_ status: OrderStatus, pushedAt timestamp: Date? = nil) -> ShownState {
        ShownState(status: status, fingerprint: "an earlier state", timestamp: timestamp)
    }

    static func order(
        status: OrderStatus,
        locale: String = "en-US",
        rider: Rider? = Rider(id: "r-7", name: "Marco Rossi", phone: "+39 06 1234567"),
        merchantName: String = "Pizza Roma",
        eta: Date = placedAt.addingTimeInterval(1800),
        updatedAt: Date = placedAt
    ) -> Order {
        Order(
            id: "o-1", merchantID: "m-1", number: "A-1001", merchantName: merchantName,
            items: [LineItem(name: "Margherita", quantity: 2, price: 8.5)],
            customer: Customer(id: "c-42", name: "Ana Lima", phone: "+49 30 1234567", locale: locale),
            address: "Hauptstr. 1, 10115 Berlin", payment: Payment(method: "card", brand: "visa", last4: "4242"),
            note: "ring twice", status: status, cancelledAt: status == .cancelled ? .pickup : nil,
            estimatedArrival: eta, rider: rider, createdAt: placedAt, updatedAt: updatedAt
        )
    }
}
