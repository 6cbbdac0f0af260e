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

    init(_ description: String) {
        self.description = description
        self.isFull = false
        self.isBusy = false
        self.domainError = nil
    }

    init(sqlite: SQLiteError) {
        self.description = sqlite.description
        self.isFull = sqlite.code == .full
        self.isBusy = sqlite.code == .busy || sqlite.code == .locked
        self.domainError = nil
    }

    init(domain: OrderError) {
        self.description = domain.description
        self.isFull = false
        self.isBusy = false
        self.domainError = domain
    }
}
