public import DeliveryActivityContract
public import OrderDomain

/// The dynamic part of the Live Activity: the client package's type itself, so that the projection
/// cannot drift from what the app decodes.
public typealias ContentState = DeliveryAttributes.ContentState

extension DeliveryStatus {
    /// The app's name for an order's status: the one mapping between the domain's type and the
    /// contract's (the contract stays free of the server's modules, so that the app can ship it).
    /// Exhaustive both ways: a status added on either side does not compile until it is mapped.
    public init(_ status: OrderStatus) {
        switch status {
        case .placed: self = .placed
        case .preparing: self = .preparing
        case .pickup: self = .pickup
        case .delivering: self = .delivering
        case .delivered: self = .delivered
        case .cancelled: self = .cancelled
        }
    }
}

extension OrderStatus {
    /// The domain's status of what the app shows.
    public init(_ status: DeliveryStatus) {
        switch status {
        case .placed: self = .placed
        case .preparing: self = .preparing
        case .pickup: self = .pickup
        case .delivering: self = .delivering
        case .delivered: self = .delivered
        case .cancelled: self = .cancelled
        }
    }
}
