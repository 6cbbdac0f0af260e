import Foundation
import Pusher
import Testing

@Suite("APNs answer classification")
struct PushResultClassifierTests {
    static let stamp = Date(timeIntervalSince1970: 1_796_212_800)

    /// Every row of Apple's device reason table, with the status it comes with and the action taken.
    static let table: [(Int, String, PushAction)] = [
        (400, "BadCollapseId", .deadLetter),
        (400, "BadDeviceToken", .dropToken(registeredBefore: nil)),
        (400, "BadExpirationDate", .deadLetter),
        (400, "BadMessageId", .deadLetter),
        (400, "BadPriority", .deadLetter),
        (400, "BadTopic", .pauseEnvironment),
        (400, "DeviceTokenNotForTopic", .dropToken(registeredBefore: nil)),
        (400, "DuplicateHeaders", .deadLetter),
        (400, "IdleTimeout", .retry(reconnect: true)),
        (400, "InvalidPushType", .deadLetter),
        (400, "MissingDeviceToken", .deadLetter),
        (400, "MissingTopic", .pauseEnvironment),
        (400, "PayloadEmpty", .deadLetter),
        (400, "TopicDisallowed", .pauseEnvironment),
        (403, "BadCertificate", .pauseEnvironment),
        (403, "BadCertificateEnvironment", .pauseEnvironment),
        (403, "ExpiredProviderToken", .refreshTokenAndRetry),
        (403, "Forbidden", .pauseEnvironment),
        (403, "InvalidProviderToken", .pauseEnvironment),
        (403, "MissingProviderToken", .pauseEnvironment),
        (403, "UnrelatedKeyIdInToken", .retry(reconnect: true)),
        (403, "BadEnvironmentKeyIdInToken", .pauseEnvironment),
        (403, "BadEnvironmentKeyInToken", .pauseEnvironment),
        (404, "BadPath", .deadLetter),
        (405, "MethodNotAllowed", .deadLetter),
        (410, "ExpiredToken", .dropToken(registeredBefore: stamp)),
        (410, "Unregistered", .dropToken(registeredBefore: stamp)),
        (413, "PayloadTooLarge", .deadLetter),
        (429, "TooManyProviderTokenUpdates", .retry(reconnect: false)),
        (429, "TooManyRequests", .retry(reconnect: false)),
        (500, "InternalServerError", .retry(reconnect: false)),
        (503, "ServiceUnavailable", .retry(reconnect: false)),
        (503, "Shutdown", .retry(reconnect: true)),
    ]

    /// Each known reason gets the action of the table.
    @Test(arguments: table)
    func knownReason(status: Int, reason: String, expected: PushAction) {
        #expect(APNsReason(reason) != .unknown(reason))
        let action = PushResultClassifier.action(
            status: status, reason: APNsReason(reason), timestamp: Self.stamp, environmentConfirmed: true
        )
        #expect(action == expected)
    }

    /// The table covers every reason the client knows.
    @Test func tableIsComplete() {
        #expect(Set(Self.table.map(\.1)) == Set(APNsReason.Known.allCases.map(\.rawValue)))
    }

    /// `BadDeviceToken` keeps the token while the environment is unconfirmed (a sandbox token on the
    /// production host looks the same).
    @Test func badDeviceTokenNeedsConfirmedEnvironment() {
        #expect(
            PushResultClassifier.action(
                status: 400, reason: APNsReason("BadDeviceToken"), timestamp: nil, environmentConfirmed: false
            ) == .deadLetter
        )
    }

    /// Success, no answer at all, and reasons APNs may add later are handled by their status.
    @Test func statusFallbacks() {
        func action(_ status: Int?, _ reason: String?) -> PushAction {
            PushResultClassifier.action(
                status: status, reason: reason.map(APNsReason.init), timestamp: nil, environmentConfirmed: true
            )
        }
        #expect(action(200, nil) == .delivered)
        #expect(action(nil, nil) == .retry(reconnect: true))
        #expect(APNsReason("SomethingNew") == .unknown("SomethingNew"))
        #expect(action(502, "SomethingNew") == .retry(reconnect: false))
        #expect(action(429, "SomethingNew") == .retry(reconnect: false))
        #expect(action(410, "SomethingNew") == .dropToken(registeredBefore: nil))
        #expect(action(403, "SomethingNew") == .pauseEnvironment)
        #expect(action(400, "SomethingNew") == .deadLetter)
    }

    /// Backoff doubles from the base up to the cap, scaled by jitter; the deadline ends retries.
    @Test func retryPolicy() {
        let policy = RetryPolicy()
        #expect(policy.delay(afterAttempt: 1, jitter: 1) == 1)
        #expect(policy.delay(afterAttempt: 4, jitter: 1) == 8)
        #expect(policy.delay(afterAttempt: 4, jitter: 0.5) == 4)
        #expect(policy.delay(afterAttempt: 40, jitter: 1) == 900)
        #expect(policy.delay(afterAttempt: 3, jitter: 0) == 0)
        #expect(!policy.isExhausted(firstAttempt: Self.stamp, now: Self.stamp.addingTimeInterval(3 * 3600)))
        #expect(policy.isExhausted(firstAttempt: Self.stamp, now: Self.stamp.addingTimeInterval(4 * 3600)))
    }
}
