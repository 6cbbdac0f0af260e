import DeliveryActivityContract
import FoundationEssentials
import OrderDomain

/// Orders and times shared by the domain tests; fixed dates, so every run is the same.
enum Fixtures {
    static let placedAt = Date(timeIntervalSince1970: 1_796_212_800)  // 2026-12-02T12:00:00Z
    static let later = placedAt.addingTimeInterval(600)

    static func order(
        status: OrderStatus, rider: Rider? = Rider(id: "r-7", name: "Marco Rossi", phone: "+39 06 1234567")
    )
        -> Order
    {
        Order(
            id: "o-1", merchantID: "m-1", number: "A-1001", merchantName: "Pizza Roma",
            items: [LineItem(name: "Margherita", quantity: 2, price: 8.5)],
            customer: Customer(id: "c-42", name: "Ana", phone: "+49 30 1234567", locale: "de-DE"),
            address: "Hauptstr. 1, 10115 Berlin", payment: Payment(method: "card", brand: "visa", last4: "4242"),
            note: "ring twice", status: status, cancelledAt: status == .cancelled ? .pickup : nil,
            estimatedArrival: placedAt.addingTimeInterval(1800), rider: rider, createdAt: placedAt, updatedAt: placedAt
        )
    }

    static func draft() -> OrderDraft {
        OrderDraft(
            number: "A-1001", merchantName: "Pizza Roma",
            items: [.init(name: "Margherita", quantity: 2, price: 8.5)],
            customer: .init(id: "c-42", name: "Ana", phone: "+49 30 1234567", locale: "de-DE"),
            address: "Hauptstr. 1, 10115 Berlin", payment: .init(method: "card", brand: "visa", last4: "4242"),
            estimatedArrival: placedAt.addingTimeInterval(1800), note: "ring twice"
        )
    }
}
