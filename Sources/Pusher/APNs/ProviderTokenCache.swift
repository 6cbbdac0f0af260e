public import Cryptography
public import Foundation

/// Holds the one provider token of an APNs key and decides when to mint the next.
///
/// APNs refuses a token older than an hour (`ExpiredProviderToken`) and a new token more often
/// than every 20 minutes (`TooManyProviderTokenUpdates`), so every request reuses one token, and a
/// new one is minted only once the current one is `refreshAfter` old (default 40 minutes, inside
/// the 20–60 minute window). Time comes in as a parameter, so tests need no sleeping.
public actor ProviderTokenCache {
    /// The youngest a token may be when it is replaced, per Apple's rule.
    public static let minimumAge: TimeInterval = 20 * 60
    /// APNs rejects tokens older than this.
    public static let maximumAge: TimeInterval = 60 * 60

    private let key: P256SigningKey
    private let keyID: String
    private let teamID: String
    private let refreshAfter: TimeInterval
    private var current: ProviderToken?
    /// Tokens minted so far, for metrics and tests.
    public private(set) var mintedCount = 0

    /// - Parameters:
    ///   - refreshAfter: age at which the token is replaced; clamped to 20…55 minutes.
    public init(key: P256SigningKey, keyID: String, teamID: String, refreshAfter: TimeInterval = 40 * 60) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.refreshAfter = min(max(refreshAfter, Self.minimumAge), Self.maximumAge - 5 * 60)
    }

    /// The token to send at `now`: the cached one while it is young enough, else a new one.
    /// - Throws: `CryptoError` if signing fails.
    public func token(now: Date) throws(CryptoError) -> ProviderToken {
        if let current, now.timeIntervalSince(current.issuedAt) < refreshAfter, now >= current.issuedAt {
            return current
        }
        return try mint(now: now)
    }

    /// Handles APNs' `ExpiredProviderToken` for `rejected`: mints a new token if `rejected` is still
    /// the current one and at least 20 minutes old; otherwise returns the current token (another
    /// request already replaced it, or replacing it now would break the 20-minute rule).
    /// - Throws: `CryptoError` if signing fails.
    public func replaceExpired(_ rejected: ProviderToken, now: Date) throws(CryptoError) -> ProviderToken {
        guard let current else { return try mint(now: now) }
        guard current == rejected, now.timeIntervalSince(current.issuedAt) >= Self.minimumAge else { return current }
        return try mint(now: now)
    }

    private func mint(now: Date) throws(CryptoError) -> ProviderToken {
        let token = try ProviderToken(keyID: keyID, teamID: teamID, issuedAt: now, key: key)
        current = token
        mintedCount += 1
        return token
    }
}
