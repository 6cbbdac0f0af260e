public import OrderDomain

/// A storage failure as the service reports it.
///
/// `isFull` tells the API to answer `503` (disk full) rather than `500`; `domainError` carries a
/// refusal of the domain raised inside a write transaction (nothing was written).
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public let isFull: Bool
    public let isBusy: Bool
    public let domainError: OrderError?
    /// A cap on registrations was reached inside the write (nothing was written).
    public let limitReached: LimitReached?

    init(_ description: String) {
        self.description = description
        self.isFull = false
        self.isBusy = false
        self.domainError = nil
        self.limitReached = nil
    }

    init(limit: LimitReached) {
        self.description = limit.description
        self.isFull = false
        self.isBusy = false
        self.domainError = nil
        self.limitReached = limit
    }

    init(sqlite: SQLiteError) {
        self.description = sqlite.description
        self.isFull = sqlite.code == .full
        self.isBusy = sqlite.code == .busy || sqlite.code == .locked
        self.domainError = nil
        self.limitReached = nil
    }

    init(domain: OrderError) {
        self.description = domain.description
        self.isFull = false
        self.isBusy = false
        self.domainError = domain
        self.limitReached = nil
    }
}

/// A registration refused because its owner has as many as it may: live activities of an order,
/// push-to-start devices of a customer.
public struct LimitReached: Error, Sendable, Equatable, CustomStringConvertible {
    public let what: String
    public let limit: Int

    public var description: String { "at most \(limit) \(what)" }
}
