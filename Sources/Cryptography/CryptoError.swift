internal import COpenSSL

/// A failure inside OpenSSL, with the library's own reason when it gave one.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public let operation: String
    public let reason: String

    public var description: String { "\(operation) failed: \(reason)" }
}

extension CryptoError {
    /// The reason OpenSSL queued for its last failure on this thread.
    static func lastOpenSSLReason() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "unknown OpenSSL error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
