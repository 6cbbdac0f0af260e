import Cryptography
public import Foundation
import Synchronization

/// An OAuth 2 access token for FCM and when it stops being valid.
public struct FCMAccessToken: Sendable, Hashable {
    public let value: String
    public let expiresAt: Date
}

/// Why no access token could be had: the project is paused until one can (the tokens are the
/// configuration's fault, not the devices').
public struct FCMAuthenticationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    /// Whether trying again later may help (the endpoint was unreachable or busy), as opposed to a
    /// refusal of the account or its key.
    public let isTransient: Bool
}

/// Exchanges a signed assertion for an access token (RFC 7523's JWT bearer grant).
public protocol FCMTokenExchange: Sendable {
    func exchange(assertion: String, at url: String) throws(FCMAuthenticationError) -> (
        token: String, lifetime: TimeInterval
    )
}

/// Holds one service account's access token, fetches a new one before the current one expires,
/// and drops it when FCM refuses it. Thread-safe: push workers share it; one fetch at a time, so
/// workers that need a token while it is fetched wait for that one instead of asking again.
public final class FCMAccessTokens: Sendable {
    /// What FCM's HTTP v1 API asks the token to allow.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// An assertion's lifetime; Google accepts at most an hour.
    static let assertionLifetime: TimeInterval = 3600

    public let account: GoogleServiceAccount
    private let exchange: any FCMTokenExchange
    private let refreshMargin: TimeInterval
    private let state = Mutex<(current: FCMAccessToken?, fetched: Int)>((nil, 0))

    /// - Parameters:
    ///   - refreshMargin: how long before its expiry a token is replaced (default 5 minutes, so a
    ///     request never carries a token that expires on the way).
    public init(account: GoogleServiceAccount, exchange: any FCMTokenExchange, refreshMargin: TimeInterval = 300) {
        self.account = account
        self.exchange = exchange
        self.refreshMargin = refreshMargin
    }

    /// Tokens fetched so far.
    public var fetchedCount: Int { state.withLock { $0.fetched } }

    /// The token to send at `now`: the cached one until `refreshMargin` before it expires, else a new one.
    /// - Throws: `FCMAuthenticationError` when the assertion cannot be signed or is refused.
    public func token(now: Date) throws(FCMAuthenticationError) -> FCMAccessToken {
        try state.withLock { (state) throws(FCMAuthenticationError) -> FCMAccessToken in
            if let current = state.current, now < current.expiresAt.addingTimeInterval(-refreshMargin) {
                return current
            }
            let assertion = try Self.assertion(for: account, issuedAt: now)
            let (value, lifetime) = try exchange.exchange(assertion: assertion, at: account.tokenURL)
            let token = FCMAccessToken(value: value, expiresAt: now.addingTimeInterval(lifetime))
            state.current = token
            state.fetched += 1
            return token
        }
    }

    /// FCM refused `token` (401): forget it, unless another worker already replaced it.
    public func discard(_ token: FCMAccessToken) {
        state.withLock { state in
            if state.current == token { state.current = nil }
        }
    }

    /// The signed JWT the token endpoint exchanges: `iss` the account, `scope` FCM, `aud` the endpoint,
    /// valid for an hour from `issuedAt`.
    static func assertion(for account: GoogleServiceAccount, issuedAt: Date) throws(FCMAuthenticationError) -> String {
        let issued = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        var header: [String: String] = ["alg": "RS256", "typ": "JWT"]
        if let keyID = account.privateKeyID { header["kid"] = keyID }
        let claims: [String: Any] = [
            "iss": account.clientEmail, "scope": scope, "aud": account.tokenURL, "iat": issued,
            "exp": issued + Int64(assertionLifetime),
        ]
        do {
            let signingInput =
                try Base64URL.encode(Array(JSONSerialization.data(withJSONObject: header, options: .sortedKeys)))
                + "." + Base64URL.encode(Array(JSONSerialization.data(withJSONObject: claims, options: .sortedKeys)))
            let signature = try account.key.signRS256(Array(signingInput.utf8))
            return signingInput + "." + Base64URL.encode(signature)
        } catch {
            throw FCMAuthenticationError(description: "signing the assertion: \(error)", isTransient: false)
        }
    }
}
