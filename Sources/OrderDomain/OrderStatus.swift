public import DeliveryActivityContract

/// Where an order is in its life: the contract's status itself, so that what the domain decides and
/// what the app shows are one type (see `DeliveryStatus`).
public typealias OrderStatus = DeliveryStatus

extension OrderStatus {
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
}
