import DeliveryActivityContract
import FoundationEssentials
import OrderDomain
import Testing

@Suite("New order validation")
struct OrderDraftTests {
    /// A complete draft becomes a placed order with a `created` event and nothing else changed.
    @Test func validDraftBecomesPlacedOrder() throws {
        let (order, event) = try Fixtures.draft().validated(
            id: "o-9", merchantID: "m-1", by: .merchant(id: "m-1"), at: Fixtures.placedAt
        )
        #expect(order.id == "o-9")
        #expect(order.merchantID == "m-1")
        #expect(order.status == .placed)
        #expect(order.stage == 0)
        #expect(order.rider == nil)
        #expect(order.customer == Customer(id: "c-42", name: "Ana", phone: "+49 30 1234567", locale: "de-DE"))
        #expect(order.payment == Payment(method: "card", brand: "visa", last4: "4242"))
        #expect(order.note == "ring twice")
        #expect(event.kind == .created)
        #expect(event.actor == "merchant:m-1")
        #expect(event.at == Fixtures.placedAt)
    }

    /// An empty draft names every required field, one issue each, in a stable order.
    @Test func emptyDraftNamesEveryMissingField() {
        let empty = OrderDraft(
            number: nil, merchantName: nil, items: nil, customer: nil, address: nil, payment: nil,
            estimatedArrival: nil, note: nil
        )
        #expect(
            fieldIssues(of: empty) == [
                "number", "merchantName", "items", "customer", "address", "payment", "estimatedArrival",
            ])
    }

    /// Each malformed field is named by its JSON path, nested ones included.
    @Test(arguments: [
        Breakage("number") { $0.number = "A 1001!" },
        Breakage("number") { $0.number = String(repeating: "9", count: 33) },
        Breakage("merchantName") { $0.merchantName = "   " },
        Breakage("items") { $0.items = [] },
        Breakage("items[0].quantity") { $0.items = [.init(name: "Tea", quantity: 0, price: 1)] },
        Breakage("items[0].price") { $0.items = [.init(name: "Tea", quantity: 1, price: -1)] },
        Breakage("items[0].price") { $0.items = [.init(name: "Tea", quantity: 1, price: .nan)] },
        Breakage("items[1].name") {
            $0.items = [.init(name: "Tea", quantity: 1, price: 1), .init(name: nil, quantity: 1, price: 1)]
        },
        Breakage("customer.id") { $0.customer?.id = nil },
        Breakage("customer.name") { $0.customer?.name = "" },
        Breakage("customer.phone") { $0.customer?.phone = "call me" },
        Breakage("customer.phone") { $0.customer?.phone = "12+34567" },
        Breakage("customer.locale") { $0.customer?.locale = "german" },
        Breakage("customer.locale") { $0.customer?.locale = nil },
        Breakage("address") { $0.address = String(repeating: "a", count: 501) },
        Breakage("payment.method") { $0.payment?.method = "iou" },
        Breakage("payment.last4") { $0.payment?.last4 = "42424" },
        Breakage("estimatedArrival") { $0.estimatedArrival = Fixtures.placedAt.addingTimeInterval(-3600) },
        Breakage("estimatedArrival") { $0.estimatedArrival = Fixtures.placedAt.addingTimeInterval(49 * 3600) },
        Breakage("note") { $0.note = "bell\u{0}" },
    ])
    func malformedFieldIsNamed(breakage: Breakage) {
        var draft = Fixtures.draft()
        breakage.apply(&draft)
        #expect(fieldIssues(of: draft) == [breakage.field])
    }

    /// Several broken fields are all reported at once, not just the first.
    @Test func reportsAllIssuesTogether() {
        var draft = Fixtures.draft()
        draft.number = ""
        draft.customer?.phone = "x"
        draft.payment?.last4 = "12"
        #expect(fieldIssues(of: draft) == ["number", "customer.phone", "payment.last4"])
    }

    /// Surrounding white space is trimmed and an empty note is no note.
    @Test func trimsText() throws {
        var draft = Fixtures.draft()
        draft.merchantName = "  Pizza Roma "
        draft.note = "   "
        let order = try draft.validated(id: "o", merchantID: "m-1", by: .admin, at: Fixtures.placedAt).order
        #expect(order.merchantName == "Pizza Roma")
        #expect(order.note == nil)
    }

    private func fieldIssues(of draft: OrderDraft) -> [String] {
        do {
            _ = try draft.validated(id: "o", merchantID: "m-1", by: .merchant(id: "m-1"), at: Fixtures.placedAt)
            return []
        } catch {
            #expect(error.code == .validationFailed)
            return error.fieldIssues.map(\.field)
        }
    }
}

/// One way to break a valid draft, and the field the error must name.
struct Breakage: Sendable, CustomStringConvertible {
    let field: String
    let apply: @Sendable (inout OrderDraft) -> Void

    init(_ field: String, _ apply: @escaping @Sendable (inout OrderDraft) -> Void) {
        self.field = field
        self.apply = apply
    }

    var description: String { field }
}
