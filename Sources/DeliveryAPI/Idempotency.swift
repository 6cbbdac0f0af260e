import Cryptography
import FoundationEssentials
import HTTPServer
import Storage

/// Replays writes retried with the same `Idempotency-Key`.
///
/// The first successful response to a key is kept for `lifetime` (a refusal is not: the client may
/// fix the cause and retry with the same key); the same key with the same request replays it, and the
/// same key with another request is `422 idempotency_mismatch`.
///
/// - The guard is the database's, not this process's: the request claims its key in the transaction
///   of its change (`claimIdempotencyKey`, a conditional insert on the key's primary key), and keeps
///   its response in the same transaction. A second request with the key, here or on another node,
///   waits for the first's commit and replays its response; a crash leaves the key, the change and
///   the response all or none, so a create retried after a `kill -9` at any moment gets its tracking
///   token back.
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

    init(store: any DeliveryStore, lifetime: TimeInterval, sealingKey: SealingKey) {
        self.store = store
        self.lifetime = lifetime
        self.sealingKey = sealingKey
    }

    /// Runs the write that `prepare` makes ready once per key: a request without the header just runs
    /// it; with the header, a replay is answered before `prepare` (from a read, without taking the
    /// write lock), and otherwise the key is claimed, and the answer kept, in the write's transaction.
    func perform(
        _ request: HTTPRequest, scope: String, now: Date,
        _ prepare: () throws -> DeliveryService.TransactionStep
    ) throws -> DeliveryService.Written {
        switch try plan(request, scope: scope, now: now, prepare) {
        case .replay(let written): return written
        case .write(let transaction): return try store.write(transaction)
        }
    }

    /// `perform` without waiting for the commit: `completion` gets the answer once the write
    /// committed or failed, on a thread of the store's. What fails before the write is queued (a
    /// malformed key, `prepare`, the replay's read) is thrown, and `completion` is not called.
    /// - Parameter orderID: the order the write locks first, if known (`DeliveryStore.write`).
    func perform(
        _ request: HTTPRequest, scope: String, now: Date, lockingOrder orderID: String?,
        _ prepare: () throws -> DeliveryService.TransactionStep,
        completion: @escaping @Sendable (Result<DeliveryService.Written, any Error>) -> Void
    ) throws {
        switch try plan(request, scope: scope, now: now, prepare) {
        case .replay(let written): completion(.success(written))
        case .write(let transaction): store.write(lockingOrder: orderID, transaction, completion: completion)
        }
    }

    private enum Plan {
        case replay(DeliveryService.Written)
        case write(DeliveryService.TransactionStep)
    }

    /// The replay of a kept answer, or the transaction to run: the request's own step, wrapped (with
    /// the header) in the claim of its key and the keeping of its answer.
    private func plan(
        _ request: HTTPRequest, scope: String, now: Date, _ prepare: () throws -> DeliveryService.TransactionStep
    ) throws -> Plan {
        guard let key = request.header(Self.headerName) else { return .write(try prepare()) }
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

        if let stored = try store.idempotentResponse(principal: scope, key: key, now: now) {
            return .replay(
                DeliveryService.Written(built: try replay(stored, requestHash: requestHash, context: context)))
        }
        let step = try prepare()
        let (lifetime, sealingKey) = (lifetime, sealingKey)
        return .write { [self] transaction in
            let claim = try transaction.claimIdempotencyKey(
                principal: scope, key: key, requestHash: requestHash, expiresAt: now.addingTimeInterval(lifetime),
                now: now)
            if case .taken(let stored) = claim {
                return DeliveryService.Written(built: try replay(stored, requestHash: requestHash, context: context))
            }
            var written = try step(transaction)
            let response = written.respond()
            written.respond = { response }
            if (200..<300).contains(response.status) {
                try transaction.saveIdempotentResponse(
                    principal: scope, key: key,
                    response: IdempotentResponse(
                        requestHash: requestHash, status: response.status,
                        body: try sealingKey.seal(response.body, context: context)))
            } else {
                try transaction.releaseIdempotencyKey(principal: scope, key: key)
            }
            return written
        }
    }

    /// The kept response, unless the key came with another request.
    private func replay(_ stored: IdempotentResponse, requestHash: String, context: [UInt8]) throws -> HTTPResponse {
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
}
