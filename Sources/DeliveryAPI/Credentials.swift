import Cryptography
import DeliveryActivityContract
public import FoundationEssentials
import OrderDomain
public import Storage

/// A customer's app holding the credential its merchant minted for it: one merchant's one customer.
struct CustomerAccount: Sendable, Hashable {
    let merchantID: String
    let customerID: String
    let credentialID: String

    /// Whether the order is this customer's, at this merchant.
    func owns(_ order: Order) -> Bool {
        order.merchantID == merchantID && order.customer.id == customerID
    }
}

/// Who is calling: staff with an API key, a customer holding one order's tracking token, or a
/// customer's app with its customer credential.
enum Caller: Sendable, Hashable {
    case staff(Principal, keyID: String)
    case customer(orderID: String)
    case customerAccount(CustomerAccount)

    /// The namespace of this caller's idempotency keys: two callers never share one.
    var idempotencyScope: String {
        switch self {
        case .staff(_, let keyID): "key:" + keyID
        case .customer(let orderID): "order:" + orderID
        case .customerAccount(let account): "customer:" + account.credentialID
        }
    }
}

/// How secrets look on the wire and how they are checked.
///
/// - API keys are `dk_<id>_<secret>`: the id finds the stored row, then the SHA-256 of the whole key
///   is compared in constant time with the stored hash, so response times say nothing about how
///   much of a guess was right. The key itself is never stored.
/// - The admin key given by configuration may have any form; it is the row `configured-admin`.
/// - Tracking tokens are `dt_` and 64 hex digits (256 random bits); the order row keeps their SHA-256,
///   looked up through a unique index: a guess costs a hash before it reaches the index.
/// - Customer credentials are `dc_<id>_<secret>`, checked like API keys; a merchant's backend mints
///   one for a signed-in customer and hands it to that customer's app.
public enum Credentials {
    static let apiKeyPrefix = "dk_"
    static let trackingTokenPrefix = "dt_"
    static let customerCredentialPrefix = "dc_"
    /// The row of the admin key set by `--admin-key`.
    static let configuredAdminKeyID = "configured-admin"

    /// A new API key with its id and the record to store.
    public static func newAPIKey(role: APIKeyRole, merchantID: String?, riderID: String?, now: Date)
        -> (key: String, record: APIKeyRecord)
    {
        let minted = newSecret(prefix: apiKeyPrefix, idPrefix: "k")
        return (
            minted.secret,
            APIKeyRecord(
                id: minted.id, keyHash: minted.hash, role: role, merchantID: merchantID, riderID: riderID,
                createdAt: now)
        )
    }

    /// A secret that names its own id (`prefix` + id + `_` + 48 hex digits), and the hash that is stored:
    /// the id finds the record without the secret being searchable.
    private static func newSecret(prefix: String, idPrefix: String) -> (id: String, secret: String, hash: String) {
        let id = idPrefix + SecureRandom.hexToken(byteCount: 6)
        let secret = prefix + id + "_" + SecureRandom.hexToken(byteCount: 24)
        return (id, secret, SHA256.hexDigest(Array(secret.utf8)))
    }

    /// The record that makes `key` (from `--admin-key`) an admin key.
    public static func configuredAdminKey(_ key: String, now: Date) -> APIKeyRecord {
        APIKeyRecord(
            id: configuredAdminKeyID, keyHash: SHA256.hexDigest(Array(key.utf8)), role: .admin, merchantID: nil,
            riderID: nil, createdAt: now)
    }

    /// A new customer credential with the record to store.
    static func newCustomerCredential(merchantID: String, customerID: String, now: Date)
        -> (credential: String, record: CustomerCredentialRecord)
    {
        let minted = newSecret(prefix: customerCredentialPrefix, idPrefix: "c")
        return (
            minted.secret,
            CustomerCredentialRecord(
                id: minted.id, keyHash: minted.hash, merchantID: merchantID, customerID: customerID, createdAt: now)
        )
    }

    /// The part of a new order id after `o_`: the creation time in milliseconds (12 hex digits), then
    /// 16 random hex digits, unguessable enough that ids reveal no volume. Ids in creation order
    /// keep the order's rows in every index keyed by its id (events, pushes, the push log) on the
    /// few pages that recent orders share: random ids put each change on pages of its own.
    static func newOrderIDSuffix(now: Date) -> String {
        let milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        let time = (0..<6).map { UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - $0))) }
        return Hex.encode(time + SecureRandom.bytes(8))
    }

    /// A new tracking token and the hash the order keeps.
    static func newTrackingToken() -> (token: String, hash: String) {
        let token = trackingTokenPrefix + SecureRandom.hexToken(byteCount: 32)
        return (token, SHA256.hexDigest(Array(token.utf8)))
    }

    /// Identifies the caller of a request.
    /// - Parameter trackingTokenLifetime: how long after its order ended a tracking token still works.
    /// - Throws: `401 unauthorized` for a missing, malformed, unknown, revoked or expired credential.
    static func authenticate(
        _ authorization: String?, store: any DeliveryStore, apiKeys: APIKeyCache, now: Date,
        trackingTokenLifetime: TimeInterval
    ) throws(APIError) -> Caller {
        let secret = try bearerSecret(authorization)
        let presentedHash = SHA256.digest(Array(secret.utf8))
        do {
            if secret.hasPrefix(trackingTokenPrefix) {
                guard let order = try store.trackedOrder(trackingTokenHash: Hex.encode(presentedHash)) else {
                    throw APIError.unauthorized("unknown tracking token")
                }
                if order.status.isFinal, now > order.updatedAt.addingTimeInterval(trackingTokenLifetime) {
                    throw APIError.unauthorized("this tracking token expired: its order ended")
                }
                return .customer(orderID: order.id)
            }
            if secret.hasPrefix(customerCredentialPrefix) {
                guard let id = identifier(of: secret, prefix: customerCredentialPrefix),
                    let record = try store.customerCredential(id: id), record.revokedAt == nil,
                    ConstantTime.equals(Array(Hex.encode(presentedHash).utf8), Array(record.keyHash.utf8))
                else { throw APIError.unauthorized("unknown or revoked customer credential") }
                return .customerAccount(
                    CustomerAccount(merchantID: record.merchantID, customerID: record.customerID, credentialID: id))
            }
            return try staffCaller(secret: secret, presentedHash: presentedHash) { id throws(StorageError) in
                try apiKeys.record(id: id, now: now, read: store.apiKey(id:))
            }
        } catch let error as APIError {
            throw error
        } catch let error as StorageError {
            throw APIError(error)
        } catch {
            throw .internalError()
        }
    }

    /// The staff caller of an API key whose record `apiKeys` holds, found without the store: what an
    /// answer from memory on the event loop may use. `nil` for any other credential, a key not kept,
    /// or one that fails: the pooled handler then authenticates the request (and counts a failure).
    static func cachedStaff(_ authorization: String?, apiKeys: APIKeyCache, now: Date) -> Caller? {
        guard let secret = try? bearerSecret(authorization), !secret.hasPrefix(trackingTokenPrefix),
            !secret.hasPrefix(customerCredentialPrefix)
        else { return nil }
        return try? staffCaller(secret: secret, presentedHash: SHA256.digest(Array(secret.utf8))) { id in
            apiKeys.cachedRecord(id: id, now: now)
        }
    }

    /// The secret of a `Bearer` credential.
    private static func bearerSecret(_ authorization: String?) throws(APIError) -> String {
        guard let authorization else { throw .unauthorized("send Authorization: Bearer <key or tracking token>") }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw .unauthorized("the Authorization header must be Bearer <key or tracking token>")
        }
        return String(parts[1])
    }

    /// The caller an API key names (the configured admin key's row for a secret without a prefix),
    /// its record found by `lookUp`.
    private static func staffCaller(
        secret: String, presentedHash: [UInt8], lookUp: (String) throws(StorageError) -> APIKeyRecord?
    ) throws -> Caller {
        let keyID = identifier(of: secret, prefix: apiKeyPrefix) ?? configuredAdminKeyID
        guard let record = try lookUp(keyID), record.revokedAt == nil,
            ConstantTime.equals(Array(Hex.encode(presentedHash).utf8), Array(record.keyHash.utf8))
        else { throw APIError.unauthorized("unknown or revoked API key") }
        switch record.role {
        case .admin: return .staff(.admin, keyID: record.id)
        case .merchant: return .staff(.merchant(id: record.merchantID ?? ""), keyID: record.id)
        case .rider:
            // Keys made before riders belonged to merchants and that no migration could bind.
            guard let merchantID = record.merchantID else {
                throw APIError.unauthorized("this rider key belongs to no merchant; an admin issues a new one")
            }
            return .staff(.rider(id: record.riderID ?? "", merchantID: merchantID), keyID: record.id)
        }
    }

    /// The key id a bearer credential names: `<id>` of an API key or customer credential, the
    /// configured admin key's row for anything without a prefix, `nil` for tracking tokens.
    static func keyID(inAuthorization authorization: String) -> String? {
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return nil }
        let secret = String(parts[1])
        if secret.hasPrefix(trackingTokenPrefix) { return nil }
        return identifier(of: secret, prefix: apiKeyPrefix) ?? identifier(of: secret, prefix: customerCredentialPrefix)
            ?? (secret.hasPrefix(apiKeyPrefix) || secret.hasPrefix(customerCredentialPrefix)
                ? nil : configuredAdminKeyID)
    }

    /// The `<id>` of a `<prefix><id>_<secret>` credential.
    private static func identifier(of secret: String, prefix: String) -> String? {
        guard secret.hasPrefix(prefix) else { return nil }
        let rest = secret.dropFirst(prefix.count)
        guard let separator = rest.firstIndex(of: "_") else { return nil }
        return String(rest[..<separator])
    }
}
