import DeliveryActivityContract
import FoundationEssentials
import OrderDomain
import Testing

/// The expected answer of one status request, written by hand from the design's rules.
enum Expected: Equatable, CustomStringConvertible {
    case applied, unchanged, illegal, closed, forbidden, notFound

    init(_ letter: Character) {
        switch letter {
        case "A": self = .applied
        case "U": self = .unchanged
        case "I": self = .illegal
        case "C": self = .closed
        case "F": self = .forbidden
        case "N": self = .notFound
        default: preconditionFailure("unknown table letter \(letter)")
        }
    }

    var description: String {
        switch self {
        case .applied: "applied"
        case .unchanged: "unchanged"
        case .illegal: "illegal_transition"
        case .closed: "order_closed"
        case .forbidden: "forbidden"
        case .notFound: "not_found"
        }
    }
}

/// Who asks, relative to the order under test (merchant m-1, rider r-7).
enum Caller: String, CaseIterable, CustomStringConvertible {
    case ownMerchant, otherMerchant, assignedRider, otherRider, admin

    var principal: Principal {
        switch self {
        case .ownMerchant: .merchant(id: "m-1")
        case .otherMerchant: .merchant(id: "m-2")
        case .assignedRider: .rider(id: "r-7", merchantID: "m-1")
        case .otherRider: .rider(id: "r-8", merchantID: "m-1")
        case .admin: .admin
        }
    }

    var description: String { rawValue }
}

/// Rows are the current status, columns the requested one, in the order
/// placed, preparing, pickup, delivering, delivered, cancelled.
/// A applied, U unchanged, I illegal_transition, C order_closed, F forbidden, N not_found.
let transitionTable: [Caller: [OrderStatus: String]] = [
    .ownMerchant: [
        .placed: "FAAFFA",
        .preparing: "FUAFFA",
        .pickup: "FIUFFA",
        .delivering: "FIIFFA",
        .delivered: "FCCFFC",
        .cancelled: "FCCFFU",
    ],
    .assignedRider: [
        .placed: "FFAAAF",
        .preparing: "FFAAAF",
        .pickup: "FFUAAF",
        .delivering: "FFIUAF",
        .delivered: "FFCCUF",
        .cancelled: "FFCCCF",
    ],
    .admin: [
        .placed: "UAAAAA",
        .preparing: "IUAAAA",
        .pickup: "IIUAAA",
        .delivering: "IIIUAA",
        .delivered: "CCCCUC",
        .cancelled: "CCCCCU",
    ],
    .otherMerchant: Dictionary(uniqueKeysWithValues: OrderStatus.allCases.map { ($0, "NNNNNN") }),
    .otherRider: Dictionary(uniqueKeysWithValues: OrderStatus.allCases.map { ($0, "NNNNNN") }),
]

/// Every (caller, current status, requested status) triple: 5 × 6 × 6 = 180 cases.
let allTransitionCases: [(Caller, OrderStatus, OrderStatus)] = Caller.allCases.flatMap { caller in
    OrderStatus.allCases.flatMap { from in OrderStatus.allCases.map { to in (caller, from, to) } }
}

func outcome(of body: () throws(OrderError) -> ChangeOutcome) -> Expected {
    do {
        switch try body() {
        case .applied: return .applied
        case .unchanged: return .unchanged
        }
    } catch {
        switch error.code {
        case .illegalTransition: return .illegal
        case .orderClosed: return .closed
        case .forbidden: return .forbidden
        case .notFound: return .notFound
        default: Issue.record("unexpected error \(error)")
        }
        return .forbidden
    }
}

@Suite("Status transitions")
struct TransitionTableTests {
    /// Each cell of the table is exactly what `applying` answers for that caller, status and request.
    @Test(arguments: allTransitionCases)
    func tableCell(caller: Caller, from: OrderStatus, to: OrderStatus) throws {
        let row = try #require(transitionTable[caller]?[from])
        let column = try #require(OrderStatus.allCases.firstIndex(of: to))
        let expected = Expected(row[row.index(row.startIndex, offsetBy: column)])
        let order = Fixtures.order(status: from)
        let actual = outcome { () throws(OrderError) in
            try order.applying(StatusChange(status: to), by: caller.principal, at: Fixtures.later)
        }
        #expect(actual == expected, "\(caller) \(from) → \(to)")
    }

    /// An applied change moves the status, stamps the time and records from, to, actor and reason.
    @Test func appliedChangeRecordsEvent() throws {
        let order = Fixtures.order(status: .preparing)
        let outcome = try order.applying(
            StatusChange(status: .delivering, reason: "skipped pickup scan"), by: .rider(id: "r-7", merchantID: "m-1"),
            at: Fixtures.later
        )
        guard case .applied(let next, let event) = outcome else {
            Issue.record("expected applied, got \(outcome)")
            return
        }
        #expect(next.status == .delivering)
        #expect(next.updatedAt == Fixtures.later)
        #expect(next.stage == 3)
        #expect(
            event
                == OrderEvent(
                    orderID: order.id, kind: .statusChanged, from: .preparing, to: .delivering, actor: "rider:r-7",
                    at: Fixtures.later, reason: "skipped pickup scan"
                ))
        #expect(outcome.transitionName == "applied")
    }

    /// A cancelled order keeps the stage it was cancelled at, for the progress bar.
    @Test(arguments: [(OrderStatus.placed, 0), (.preparing, 1), (.pickup, 2), (.delivering, 3)])
    func cancelledKeepsStage(from: OrderStatus, stage: Int) throws {
        let next = try Fixtures.order(status: from)
            .applying(StatusChange(status: .cancelled), by: .admin, at: Fixtures.later).order
        #expect(next.status == .cancelled)
        #expect(next.cancelledAt == from)
        #expect(next.stage == stage)
    }

    /// A repeated status is `unchanged` and returns the order untouched, so nothing is stored or pushed.
    @Test func repeatIsUnchangedAndUntouched() throws {
        let order = Fixtures.order(status: .delivered)
        let outcome = try order.applying(
            StatusChange(status: .delivered), by: .rider(id: "r-7", merchantID: "m-1"), at: Fixtures.later)
        #expect(outcome == .unchanged(order))
        #expect(outcome.transitionName == "unchanged")
    }

    /// `illegal_transition` and `order_closed` name the order's current status.
    @Test func errorsNameCurrentStatus() {
        let order = Fixtures.order(status: .delivering)
        #expect(throws: OrderError(.illegalTransition, "")) {
            try order.applying(StatusChange(status: .preparing), by: .admin, at: Fixtures.later)
        }
        do {
            _ = try order.applying(StatusChange(status: .preparing), by: .admin, at: Fixtures.later)
        } catch {
            #expect(error.currentStatus == .delivering)
        }
        do {
            _ = try Fixtures.order(status: .cancelled).applying(
                StatusChange(status: .delivered), by: .admin, at: Fixtures.later
            )
        } catch {
            #expect(error.code == .orderClosed)
            #expect(error.currentStatus == .cancelled)
        }
    }

    /// A status change may carry a new ETA; one outside the allowed window names the field.
    @Test func statusChangeWithETA() throws {
        let order = Fixtures.order(status: .pickup)
        let eta = Fixtures.later.addingTimeInterval(900)
        let next = try order.applying(
            StatusChange(status: .delivering, estimatedArrival: eta), by: .rider(id: "r-7", merchantID: "m-1"),
            at: Fixtures.later
        ).order
        #expect(next.estimatedArrival == eta)

        do {
            _ = try order.applying(
                StatusChange(status: .delivering, estimatedArrival: Fixtures.later.addingTimeInterval(72 * 3600)),
                by: .rider(id: "r-7", merchantID: "m-1"), at: Fixtures.later
            )
            Issue.record("an ETA three days out was accepted")
        } catch {
            #expect(error.code == .validationFailed)
            #expect(error.fieldIssues.map(\.field) == ["estimatedArrival"])
        }
    }
}
