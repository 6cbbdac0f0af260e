import Cryptography
import Foundation
import Pusher
import TestSupport
import Testing

@Suite("Provider token refresh window")
struct ProviderTokenCacheTests {
    let start = Date(timeIntervalSince1970: 1_796_212_800)

    func cache(refreshAfter: TimeInterval = 40 * 60) throws -> ProviderTokenCache {
        ProviderTokenCache(
            key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ",
            refreshAfter: refreshAfter
        )
    }

    /// One token serves every request until it is 40 minutes old, then exactly one new token is minted.
    @Test func reusesThenRefreshes() async throws {
        let cache = try cache()
        let first = try await cache.token(now: start)
        for minute in stride(from: 0.0, to: 40, by: 1) {
            #expect(try await cache.token(now: start.addingTimeInterval(minute * 60)) == first)
        }
        let second = try await cache.token(now: start.addingTimeInterval(40 * 60))
        #expect(second != first)
        #expect(second.issuedAt == start.addingTimeInterval(40 * 60))
        #expect(try await cache.token(now: start.addingTimeInterval(41 * 60)) == second)
        #expect(await cache.mintedCount == 2)
    }

    /// The refresh age is kept inside Apple's window: never below 20 minutes, never near 60.
    @Test func refreshAgeIsClamped() async throws {
        let eager = try cache(refreshAfter: 60)
        let first = try await eager.token(now: start)
        #expect(try await eager.token(now: start.addingTimeInterval(19 * 60)) == first)
        #expect(try await eager.token(now: start.addingTimeInterval(20 * 60)) != first)

        let lazy = try cache(refreshAfter: 3 * 3600)
        let old = try await lazy.token(now: start)
        #expect(try await lazy.token(now: start.addingTimeInterval(55 * 60)) != old)
    }

    /// `ExpiredProviderToken` re-mints once; a second report of the same old token, or a report within
    /// 20 minutes of minting, keeps the current token.
    @Test func expiredTokenIsReplacedOnce() async throws {
        let cache = try cache()
        let first = try await cache.token(now: start)
        #expect(try await cache.replaceExpired(first, now: start.addingTimeInterval(5 * 60)) == first)
        let replaced = try await cache.replaceExpired(first, now: start.addingTimeInterval(25 * 60))
        #expect(replaced != first)
        #expect(try await cache.replaceExpired(first, now: start.addingTimeInterval(26 * 60)) == replaced)
        #expect(await cache.mintedCount == 2)
    }
}
