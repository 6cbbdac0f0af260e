/// A failure inside OpenSSL, with the library's own reason when it gave one.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public let operation: String
    public let reason: String

    public init(operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "\(operation) failed: \(reason)" }
}
