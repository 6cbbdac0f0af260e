/// A failure inside OpenSSL, with the library's own reason when it gave one.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public let operation: String
    public let reason: String

    public var description: String { "\(operation) failed: \(reason)" }
}
