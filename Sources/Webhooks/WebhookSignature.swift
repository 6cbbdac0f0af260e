public import Cryptography
public import FoundationEssentials

/// A signing secret in the Standard Webhooks form: `whsec_` and the base64 of its random bytes.
public struct WebhookSecret: Sendable, Hashable {
    public let bytes: [UInt8]

    /// 32 random bytes (the specification allows 24 to 64).
    public static func generate() -> WebhookSecret { WebhookSecret(bytes: SecureRandom.bytes(32)) }

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the `whsec_…` form; `nil` unless it holds 24 to 64 bytes of base64.
    public init?(text: String) {
        guard text.hasPrefix("whsec_"), let decoded = Data(base64Encoded: String(text.dropFirst(6))),
            (24...64).contains(decoded.count)
        else { return nil }
        bytes = Array(decoded)
    }

    /// What the merchant is shown once and gives its verification library.
    public var text: String { "whsec_" + Data(bytes).base64EncodedString() }

    /// The secret as the store keeps it: sealed with the service's key, bound to its endpoint.
    public func sealed(with key: SealingKey, endpointID: String) throws(CryptoError) -> [UInt8] {
        try key.seal(bytes, context: Self.context(endpointID))
    }

    public static func open(_ sealed: [UInt8], with key: SealingKey, endpointID: String) throws(CryptoError)
        -> WebhookSecret
    {
        WebhookSecret(bytes: try key.open(sealed, context: context(endpointID)))
    }

    private static func context(_ endpointID: String) -> [UInt8] { Array("webhook-secret \(endpointID)".utf8) }
}

/// The `webhook-*` headers of Standard Webhooks v1: the signature is `v1,` and the base64 of
/// HMAC-SHA256 over `id.timestamp.body` with the secret's bytes; several (during a rotation) are
/// separated by spaces, and a receiver accepts the message if any one verifies.
public enum WebhookSignature {
    /// The signature header's value for one message, one signature per secret.
    public static func header(id: String, timestamp: Int64, body: [UInt8], secrets: [WebhookSecret]) -> String {
        header(id: id, timestamp: timestamp, body: body, keys: secrets.map { HMACSHA256.Key($0.bytes) })
    }

    /// The signature header's value for one message, one signature per key.
    public static func header(id: String, timestamp: Int64, body: [UInt8], keys: [HMACSHA256.Key]) -> String {
        var signed = Array("\(id).\(timestamp).".utf8)
        signed.append(contentsOf: body)
        return keys.map { key in
            "v1," + Data(key.authenticationCode(signed)).base64EncodedString()
        }.joined(separator: " ")
    }

    /// The request headers of one attempt (the timestamp is the attempt's, the id the event's).
    public static func headers(id: String, attemptedAt: Date, body: [UInt8], keys: [HMACSHA256.Key]) -> [String] {
        let timestamp = Int64(attemptedAt.timeIntervalSince1970.rounded(.down))
        return [
            "webhook-id: \(id)", "webhook-timestamp: \(timestamp)",
            "webhook-signature: \(header(id: id, timestamp: timestamp, body: body, keys: keys))",
        ]
    }
}
