internal import Cryptography
internal import FoundationEssentials
internal import Storage

/// Signs the dispatcher's attempts. Each endpoint's secrets are unsealed once and kept as ready
/// HMAC keys, found again by the sealed secrets they came from, so that a rotation takes effect
/// with the next attempt while every other attempt neither unseals nor keys HMAC again.
///
/// - Important: Not `Sendable`: the dispatcher's thread owns it. The keys stand for the secrets,
///   which the dispatcher needs for as long as it runs anyway.
final class WebhookSigner {
    private struct Entry {
        let sealed: [UInt8]
        let previousSealed: [UInt8]?
        let keys: [HMACSHA256.Key]
    }

    private let sealingKey: SealingKey
    /// Endpoints whose keys are kept; past it the cache starts again (rebuilding one costs an
    /// unseal per secret).
    private let capacity: Int
    private var entries: [String: Entry] = [:]

    init(sealingKey: SealingKey, capacity: Int = 4_096) {
        self.sealingKey = sealingKey
        self.capacity = capacity
    }

    /// The `webhook-*` headers of one attempt of `delivery`.
    /// - Throws: `CryptoError` when a secret does not open with the service's sealing key.
    func headers(for delivery: WebhookDelivery, attemptedAt now: Date) throws(CryptoError) -> [String] {
        WebhookSignature.headers(
            id: delivery.eventID, attemptedAt: now, body: delivery.body, keys: try keys(for: delivery))
    }

    private func keys(for delivery: WebhookDelivery) throws(CryptoError) -> [HMACSHA256.Key] {
        if let entry = entries[delivery.endpointID], entry.sealed == delivery.secretSealed,
            entry.previousSealed == delivery.previousSecretSealed
        {
            return entry.keys
        }
        var keys = [HMACSHA256.Key(try open(delivery.secretSealed, delivery))]
        if let previous = delivery.previousSecretSealed { keys.append(HMACSHA256.Key(try open(previous, delivery))) }
        if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        entries[delivery.endpointID] = Entry(
            sealed: delivery.secretSealed, previousSealed: delivery.previousSecretSealed, keys: keys)
        return keys
    }

    private func open(_ sealed: [UInt8], _ delivery: WebhookDelivery) throws(CryptoError) -> [UInt8] {
        try WebhookSecret.open(sealed, with: sealingKey, endpointID: delivery.endpointID).bytes
    }
}
