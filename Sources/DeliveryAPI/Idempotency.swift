import Cryptography
import FoundationEssentials
import HTTPServer
import Storage
import Synchronization

/// Replays writes retried with the same `Idempotency-Key`.
///
/// The first successful response to a key is stored for `lifetime` (a refusal is not: the client
/// may fix the cause and retry with the same key); the same key with the same request replays it, the same key
/// with another request is `422 idempotency_mismatch`, and a second request while the first is still
/// running is `409 conflict`. The record is written right after the change commits: if the process
/// dies in between, the retry runs again, and every write of this API is safe to repeat (a repeated
/// status is `unchanged`, a repeated order number returns the first order).
final class Idempotency: Sendable {
    static let headerName = "Idempotency-Key"
    static let maximumKeyLength = 255

    private let store: any DeliveryStore
    private let lifetime: TimeInterval
    private let running = Mutex(Set<String>())

    init(store: any DeliveryStore, lifetime: TimeInterval) {
        self.store = store
        self.lifetime = lifetime
    }

    /// Runs `body` once per key; a request without the header just runs.
    func perform(
        _ request: HTTPRequest, scope: String, now: Date, _ body: () throws -> HTTPResponse
    ) throws -> HTTPResponse {
        guard let key = request.header(Self.headerName) else { return try body() }
        guard (1...Self.maximumKeyLength).contains(key.utf8.count) else {
            throw APIError.badRequest("Idempotency-Key must be 1 to \(Self.maximumKeyLength) bytes")
        }
        var fingerprint = Array(request.method.utf8)
        fingerprint.append(0)
        fingerprint += Array(request.path.utf8)
        fingerprint.append(0)
        fingerprint += request.body
        let requestHash = SHA256.hexDigest(fingerprint)

        let slot = scope + "\u{1F}" + key
        guard running.withLock({ $0.insert(slot).inserted }) else {
            throw APIError.conflict("a request with this Idempotency-Key is still being processed")
        }
        defer { _ = running.withLock { $0.remove(slot) } }

        if let stored = try store.idempotentResponse(principal: scope, key: key, now: now) {
            guard stored.requestHash == requestHash else { throw APIError.idempotencyMismatch() }
            var replay = HTTPResponse.json(stored.status, stored.body)
            replay.headers.append(("Idempotent-Replayed", "true"))
            return replay
        }
        let response = try body()
        if (200..<300).contains(response.status) {
            try store.saveIdempotentResponse(
                principal: scope, key: key,
                response: IdempotentResponse(requestHash: requestHash, status: response.status, body: response.body),
                expiresAt: now.addingTimeInterval(lifetime), now: now
            )
        }
        return response
    }
}
