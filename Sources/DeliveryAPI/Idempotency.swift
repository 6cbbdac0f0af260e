import Cryptography
import FoundationEssentials
import HTTPServer
import Storage
import Synchronization

/// Replays writes retried with the same `Idempotency-Key`.
///
/// The first successful response to a key is kept for `lifetime` (a refusal is not: the client may
/// fix the cause and retry with the same key); the same key with the same request replays it, the
/// same key with another request is `422 idempotency_mismatch`, and a second request while the first
/// is still running is `409 conflict`.
///
/// - The record is written in the same transaction as the change it records (`atomically`): a crash
///   leaves both or neither, so a create retried after a `kill -9` at any moment gets its tracking
///   token back (from the replay, or from a create that runs again because nothing committed).
/// - The kept response is sealed (AES-256-GCM, bound to its scope, key and request) with a key that
///   is not in the database: responses carry tracking tokens and customers' contact details, which
///   are therefore unreadable in the database file and in its backups.
final class Idempotency: Sendable {
    static let headerName = "Idempotency-Key"
    static let maximumKeyLength = 255

    /// 1 to 255 visible ASCII characters: what a header carries intact, and what the API document states.
    static func isWellFormed(_ key: String) -> Bool {
        (1...maximumKeyLength).contains(key.utf8.count) && key.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    private let store: any DeliveryStore
    private let lifetime: TimeInterval
    private let sealingKey: SealingKey
    private let running = Mutex(Set<String>())

    init(store: any DeliveryStore, lifetime: TimeInterval, sealingKey: SealingKey) {
        self.store = store
        self.lifetime = lifetime
        self.sealingKey = sealingKey
    }

    /// Runs `body` once per key; a request without the header just runs.
    func perform(
        _ request: HTTPRequest, scope: String, now: Date, _ body: () throws -> HTTPResponse
    ) throws -> HTTPResponse {
        guard let key = request.header(Self.headerName) else { return try body() }
        guard Self.isWellFormed(key) else {
            throw APIError.badRequest("Idempotency-Key must be 1 to \(Self.maximumKeyLength) visible ASCII characters")
        }
        var fingerprint = Array(request.method.utf8)
        fingerprint.append(0)
        fingerprint += Array(request.path.utf8)
        fingerprint.append(0)
        fingerprint += request.body
        let requestHash = SHA256.hexDigest(fingerprint)
        let context = Array((scope + "\u{1F}" + key + "\u{1F}" + requestHash).utf8)

        let slot = scope + "\u{1F}" + key
        guard running.withLock({ $0.insert(slot).inserted }) else {
            throw APIError.conflict("a request with this Idempotency-Key is still being processed")
        }
        defer { _ = running.withLock { $0.remove(slot) } }

        if let stored = try store.idempotentResponse(principal: scope, key: key, now: now) {
            guard stored.requestHash == requestHash else { throw APIError.idempotencyMismatch() }
            let replayed: [UInt8]
            do {
                replayed = try sealingKey.open(stored.body, context: context)
            } catch {
                throw APIError.conflict(
                    "the first answer to this Idempotency-Key can no longer be read (the sealing key changed); "
                        + "check the order and retry with a new key")
            }
            var replay = HTTPResponse.json(stored.status, replayed)
            replay.headers.append(("Idempotent-Replayed", "true"))
            return replay
        }
        let (store, lifetime, sealingKey) = (self.store, self.lifetime, self.sealingKey)
        return try store.atomically {
            let response = try body()
            if (200..<300).contains(response.status) {
                try store.saveIdempotentResponse(
                    principal: scope, key: key,
                    response: IdempotentResponse(
                        requestHash: requestHash, status: response.status,
                        body: try sealingKey.seal(response.body, context: context)),
                    expiresAt: now.addingTimeInterval(lifetime), now: now
                )
            }
            return response
        }
    }
}
