public import DeliveryActivityContract
public import FoundationEssentials

/// An order as the server knows it, private fields included.
///
/// - Important: `customer.phone`, `address`, `payment` and `note` are private. Only the Projection
///   module decides what of an order leaves the server, and it reads none of them.
public struct Order: Sendable, Hashable {
    public let id: String
    public let merchantID: String
    /// The merchant's short display number (`A-1001`), unique per merchant.
    public let number: String
    public let merchantName: String
    public let items: [LineItem]
    public let customer: Customer
    public let address: String
    public let payment: Payment
    public let note: String?
    public internal(set) var status: OrderStatus
    /// The status the order had when it was cancelled; `nil` unless `status == .cancelled`.
    public internal(set) var cancelledAt: OrderStatus?
    public internal(set) var estimatedArrival: Date
    public internal(set) var rider: Rider?
    /// Where the order goes, if the merchant gave coordinates. Private, like `address`: it only
    /// turns the rider's positions into a remaining distance.
    public let destination: Coordinate?
    /// The ride so far, from the rider's positions while the order is on its way.
    public internal(set) var tracking: DeliveryTracking?
    public let createdAt: Date
    public internal(set) var updatedAt: Date

    /// Rebuilds an order that was validated before, e.g. when storage reads it back.
    public init(
        id: String,
        merchantID: String,
        number: String,
        merchantName: String,
        items: [LineItem],
        customer: Customer,
        address: String,
        payment: Payment,
        note: String?,
        status: OrderStatus,
        cancelledAt: OrderStatus?,
        estimatedArrival: Date,
        rider: Rider?,
        createdAt: Date,
        updatedAt: Date,
        destination: Coordinate? = nil,
        tracking: DeliveryTracking? = nil
    ) {
        self.id = id
        self.merchantID = merchantID
        self.number = number
        self.merchantName = merchantName
        self.items = items
        self.customer = customer
        self.address = address
        self.payment = payment
        self.note = note
        self.status = status
        self.cancelledAt = cancelledAt
        self.estimatedArrival = estimatedArrival
        self.rider = rider
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.destination = destination
        self.tracking = tracking
    }

    /// The order as it would look with this ride: what the projection shows of a position before it
    /// is stored.
    public func tracked(_ tracking: DeliveryTracking?) -> Order {
        var order = self
        order.tracking = tracking
        return order
    }

    /// Whether a position of its rider means anything: a rider is assigned and the order is open.
    public var acceptsPositions: Bool { rider != nil && !status.isFinal }

    /// The destination while the order is `delivering`: only then does a position measure the ride.
    public var rideDestination: Coordinate? { status == .delivering ? destination : nil }

    /// The step shown on the progress bar, 0…4; a cancelled order keeps the step it was cancelled at.
    public var stage: Int {
        if let stage = status.pathStage { return stage }
        return cancelledAt?.pathStage ?? 0
    }

    /// Whether a principal may learn that this order exists at all.
    ///
    /// A merchant sees its own orders, a rider the orders its merchant assigned to it, an admin every
    /// order. A rider of another merchant with the same id sees nothing: merchants name their own riders.
    public func isVisible(to principal: Principal) -> Bool {
        switch principal {
        case .admin: true
        case .merchant(let id): id == merchantID
        case .rider(let id, let merchant): merchantID == merchant && rider?.id == id
        }
    }
}

/// One line of the order, as the merchant sent it.
public struct LineItem: Sendable, Hashable {
    public let name: String
    public let quantity: Int
    /// Unit price in the merchant's currency; kept as sent, never used for arithmetic here.
    public let price: Double

    public init(name: String, quantity: Int, price: Double) {
        self.name = name
        self.quantity = quantity
        self.price = price
    }
}

/// The customer of an order. `phone` is private.
public struct Customer: Sendable, Hashable {
    public let id: String
    public let name: String
    public let phone: String
    /// A BCP 47 language tag (`de-DE`, `zh-Hans`), used to localise the Live Activity's text.
    public let locale: String

    public init(id: String, name: String, phone: String, locale: String) {
        self.id = id
        self.name = name
        self.phone = phone
        self.locale = locale
    }
}

/// How the order is paid. Private: never projected, never logged.
public struct Payment: Sendable, Hashable {
    public let method: String
    public let brand: String?
    public let last4: String?

    public init(method: String, brand: String?, last4: String?) {
        self.method = method
        self.brand = brand
        self.last4 = last4
    }
}

/// The rider assigned to an order. `phone` is private; only a first name is ever projected.
public struct Rider: Sendable, Hashable {
    public let id: String
    public let name: String
    public let phone: String?

    public init(id: String, name: String, phone: String?) {
        self.id = id
        self.name = name
        self.phone = phone
    }
}
