public import DeliveryActivityContract
/// Who asks for a change: the role of an API key, bound to the merchant or rider it belongs to.
///
/// A rider belongs to a merchant: rider ids are the merchant's own names, so two merchants may both
/// have an `r-1` and neither can reach the other's deliveries through it.
///
/// Customers are not principals here: a tracking token only reads one order's public view and
/// registers its activities, which the order's state machine never sees.
public enum Principal: Sendable, Hashable {
    case merchant(id: String)
    case rider(id: String, merchantID: String)
    case admin

    /// The statuses this role may ask for, before ownership and order are checked.
    public var settableStatuses: Set<OrderStatus> {
        switch self {
        case .merchant: [.preparing, .pickup, .cancelled]
        case .rider: [.pickup, .delivering, .delivered]
        case .admin: Set(OrderStatus.allCases)
        }
    }

    /// A stable, non-secret label for the order's history (`merchant:m-1`, `rider:r-7`, `admin`).
    public var auditLabel: String {
        switch self {
        case .merchant(let id): "merchant:\(id)"
        case .rider(let id, _): "rider:\(id)"
        case .admin: "admin"
        }
    }
}
