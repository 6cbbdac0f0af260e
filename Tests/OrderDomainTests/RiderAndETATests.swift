import DeliveryActivityContract
import FoundationEssentials
import OrderDomain
import Testing

@Suite("Rider assignment and ETA changes")
struct RiderAndETATests {
    let rider = Rider(id: "r-9", name: "Lena Vogel", phone: "+49 170 5555555")

    /// The order's merchant and admins assign riders on open orders; the assignment is an event.
    @Test(arguments: [Principal.merchant(id: "m-1"), .admin])
    func staffAssignsRider(principal: Principal) throws {
        let outcome = try Fixtures.order(status: .preparing, rider: nil).assigning(
            rider, by: principal, at: Fixtures.later)
        guard case .applied(let order, let event) = outcome else {
            Issue.record("expected applied")
            return
        }
        #expect(order.rider == rider)
        #expect(event.kind == .riderAssigned)
        #expect(event.from == .preparing && event.to == .preparing)
        #expect(order.isVisible(to: .rider(id: "r-9", merchantID: "m-1")))
        #expect(!order.isVisible(to: .rider(id: "r-7", merchantID: "m-1")))
        // Another merchant's rider of the same name is another rider.
        #expect(!order.isVisible(to: .rider(id: "r-9", merchantID: "m-2")))
    }

    /// Who may assign: another merchant does not see the order, a rider is forbidden, closed orders refuse.
    @Test func assignmentRules() {
        let open = Fixtures.order(status: .pickup)
        #expect(throws: OrderError(.notFound, "")) {
            try open.assigning(rider, by: .merchant(id: "m-2"), at: Fixtures.later)
        }
        #expect(throws: OrderError(.forbidden, "")) {
            try open.assigning(rider, by: .rider(id: "r-7", merchantID: "m-1"), at: Fixtures.later)
        }
        #expect(throws: OrderError(.orderClosed, "")) {
            try Fixtures.order(status: .delivered).assigning(rider, by: .admin, at: Fixtures.later)
        }
        #expect(throws: OrderError(.validationFailed, "")) {
            try open.assigning(Rider(id: "", name: "X", phone: "nope"), by: .admin, at: Fixtures.later)
        }
    }

    /// Assigning the same rider again changes nothing.
    @Test func sameRiderIsUnchanged() throws {
        let order = Fixtures.order(status: .pickup)
        let same = try #require(order.rider)
        #expect(try order.assigning(same, by: .admin, at: Fixtures.later) == .unchanged(order))
    }

    /// Merchant, assigned rider and admin move the ETA; the same ETA again is unchanged.
    @Test(arguments: [Principal.merchant(id: "m-1"), .rider(id: "r-7", merchantID: "m-1"), .admin])
    func etaChange(principal: Principal) throws {
        let order = Fixtures.order(status: .delivering)
        let eta = Fixtures.later.addingTimeInterval(2400)
        let outcome = try order.changingEstimatedArrival(to: eta, by: principal, at: Fixtures.later)
        guard case .applied(let next, let event) = outcome else {
            Issue.record("expected applied")
            return
        }
        #expect(next.estimatedArrival == eta)
        #expect(next.status == .delivering)
        #expect(event.kind == .estimatedArrivalChanged)
        #expect(try next.changingEstimatedArrival(to: eta, by: principal, at: Fixtures.later) == .unchanged(next))
    }

    /// ETA changes: unseen orders are not found, closed ones refuse, absurd times name the field.
    @Test func etaRules() {
        let order = Fixtures.order(status: .pickup)
        let eta = Fixtures.later.addingTimeInterval(600)
        #expect(throws: OrderError(.notFound, "")) {
            try order.changingEstimatedArrival(to: eta, by: .rider(id: "r-8", merchantID: "m-1"), at: Fixtures.later)
        }
        #expect(throws: OrderError(.orderClosed, "")) {
            try Fixtures.order(status: .cancelled).changingEstimatedArrival(to: eta, by: .admin, at: Fixtures.later)
        }
        #expect(throws: OrderError(.validationFailed, "")) {
            try order.changingEstimatedArrival(
                to: Fixtures.placedAt.addingTimeInterval(-7200), by: .admin, at: Fixtures.later)
        }
    }
}
