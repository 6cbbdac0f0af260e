public import FoundationEssentials

/// One applied change of an order: its history, one row per change, never rewritten.
public struct OrderEvent: Sendable, Hashable {
    /// What changed. Status changes are what the Live Activity follows; the others refresh it.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case created
        case statusChanged = "status_changed"
        case estimatedArrivalChanged = "eta_changed"
        case riderAssigned = "rider_assigned"
    }

    public let orderID: String
    public let kind: Kind
    /// The status before the change; equal to `to` for changes that keep the status.
    public let from: OrderStatus
    public let to: OrderStatus
    /// `Principal.auditLabel` of who made the change.
    public let actor: String
    public let at: Date
    /// Free text the caller gave (`reason` of a status change); private, never projected.
    public let reason: String?

    public init(
        orderID: String, kind: Kind, from: OrderStatus, to: OrderStatus, actor: String, at: Date, reason: String?
    ) {
        self.orderID = orderID
        self.kind = kind
        self.from = from
        self.to = to
        self.actor = actor
        self.at = at
        self.reason = reason
    }
}

/// The answer of a change request: either the order changed and here is the event to record,
/// or it already was as asked and nothing is stored or pushed.
public enum ChangeOutcome: Sendable, Hashable {
    case applied(Order, OrderEvent)
    case unchanged(Order)

    /// The order after the request, changed or not.
    public var order: Order {
        switch self {
        case .applied(let order, _), .unchanged(let order): order
        }
    }

    /// The wire word of the API's `transition` field.
    public var transitionName: String {
        switch self {
        case .applied: "applied"
        case .unchanged: "unchanged"
        }
    }
}
