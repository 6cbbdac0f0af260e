/// Where an order is in its life, in the order a delivery happens.
///
/// The raw values are the strings of the HTTP API and of the Live Activity `ContentState.status`,
/// so they never change.
public enum OrderStatus: String, Sendable, Hashable, CaseIterable, Codable {
    case placed
    case preparing
    case pickup
    case delivering
    case delivered
    case cancelled

    /// The step on the delivery path, 0…4. `cancelled` has none of its own: an order keeps the stage
    /// it was cancelled at, so `Order.stage` answers for it.
    public var pathStage: Int? {
        switch self {
        case .placed: 0
        case .preparing: 1
        case .pickup: 2
        case .delivering: 3
        case .delivered: 4
        case .cancelled: nil
        }
    }

    /// No change is possible after a terminal status; retries of the same status are still answered.
    public var isTerminal: Bool {
        self == .delivered || self == .cancelled
    }
}
