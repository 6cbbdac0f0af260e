import Cryptography
import Foundation
import Storage
import Telemetry
import Testing

@testable import Webhooks

@Suite struct WebhookSignatureTests {
    /// The example of the Standard Webhooks specification (and of its reference libraries).
    @Test func signsTheSpecificationsExample() throws {
        let secret = try #require(WebhookSecret(text: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let header = WebhookSignature.header(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8),
            secrets: [secret])
        #expect(header == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    /// During a rotation both secrets sign: a receiver holding either verifies.
    @Test func signsWithEverySecretSeparatedBySpaces() throws {
        let old = WebhookSecret.generate()
        let new = WebhookSecret.generate()
        let header = WebhookSignature.header(id: "msg_1", timestamp: 1, body: [1, 2], secrets: [new, old])
        let parts = header.split(separator: " ").map(String.init)
        #expect(parts.count == 2)
        #expect(parts[0] == WebhookSignature.header(id: "msg_1", timestamp: 1, body: [1, 2], secrets: [new]))
        #expect(parts[1] == WebhookSignature.header(id: "msg_1", timestamp: 1, body: [1, 2], secrets: [old]))
    }

    @Test func secretsRoundTripTheirTextAndRefuseOtherForms() throws {
        let secret = WebhookSecret.generate()
        #expect(secret.bytes.count == 32)
        #expect(secret.text.hasPrefix("whsec_"))
        #expect(WebhookSecret(text: secret.text) == secret)
        #expect(WebhookSecret(text: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == nil)  // no prefix
        #expect(WebhookSecret(text: "whsec_" + Data([1, 2, 3]).base64EncodedString()) == nil)  // too short
        #expect(WebhookSecret(text: "whsec_not base64!") == nil)
    }

    /// Sealed secrets open only with the same key and for the same endpoint.
    @Test func sealedSecretsAreBoundToTheirEndpoint() throws {
        let key = SealingKey.generate()
        let secret = WebhookSecret.generate()
        let sealed = try secret.sealed(with: key, endpointID: "ep_1")
        #expect(!sealed.isEmpty && sealed != secret.bytes)
        #expect(try WebhookSecret.open(sealed, with: key, endpointID: "ep_1") == secret)
        #expect(throws: CryptoError.self) { try WebhookSecret.open(sealed, with: key, endpointID: "ep_2") }
        #expect(throws: CryptoError.self) { try WebhookSecret.open(sealed, with: .generate(), endpointID: "ep_1") }
    }

    @Test func headersCarryTheEventIDAndTheAttemptsTimeInSeconds() {
        let secret = WebhookSecret(bytes: [UInt8](repeating: 7, count: 24))
        let headers = WebhookSignature.headers(
            id: "msg_x", attemptedAt: Date(timeIntervalSince1970: 1_700_000_000.9), body: [],
            keys: [HMACSHA256.Key(secret.bytes)])
        #expect(headers[0] == "webhook-id: msg_x")
        #expect(headers[1] == "webhook-timestamp: 1700000000")
        #expect(
            headers[2]
                == "webhook-signature: "
                + WebhookSignature.header(id: "msg_x", timestamp: 1_700_000_000, body: [], secrets: [secret]))
    }

    /// The dispatcher's signer keeps an endpoint's keys, and signs with the new secrets as soon as a
    /// delivery carries them (a rotation), never with the ones it kept.
    @Test func theSignerFollowsARotation() throws {
        let key = SealingKey.generate()
        let old = WebhookSecret.generate()
        let new = WebhookSecret.generate()
        func delivery(_ secrets: [WebhookSecret], sealedWith sealing: SealingKey? = nil) throws -> WebhookDelivery {
            WebhookDelivery(
                source: .row(id: 1), endpointID: "ep_1", eventID: "msg_1", eventCreatedAt: Date(), attempts: 0,
                body: [1, 2, 3], url: "https://x",
                secretSealed: try secrets[0].sealed(with: sealing ?? key, endpointID: "ep_1"),
                previousSecretSealed: try secrets.dropFirst().first?.sealed(with: key, endpointID: "ep_1"),
                failingSince: nil)
        }
        func signature(_ secrets: [WebhookSecret]) -> String {
            "webhook-signature: "
                + WebhookSignature.header(id: "msg_1", timestamp: 5, body: [1, 2, 3], secrets: secrets)
        }
        let signer = WebhookSigner(sealingKey: key)
        let at = Date(timeIntervalSince1970: 5)
        #expect(try signer.headers(for: delivery([old]), attemptedAt: at)[2] == signature([old]))
        #expect(try signer.headers(for: delivery([old]), attemptedAt: at)[2] == signature([old]))
        #expect(try signer.headers(for: delivery([new, old]), attemptedAt: at)[2] == signature([new, old]))
        #expect(try signer.headers(for: delivery([new]), attemptedAt: at)[2] == signature([new]))
        let foreign = try delivery([new], sealedWith: .generate())
        #expect(throws: CryptoError.self) { try signer.headers(for: foreign, attemptedAt: at) }
    }
}

@Suite struct WebhookPolicyTests {
    @Test func refusesPrivateLoopbackAndLinkLocalAddressesByDefault() {
        let policy = WebhookURLPolicy()
        for address: [UInt8] in [
            [127, 0, 0, 1], [10, 1, 2, 3], [172, 16, 0, 1], [172, 31, 255, 255], [192, 168, 1, 1],
            [169, 254, 169, 254],
            [0, 0, 0, 0], [100, 64, 0, 1], [224, 0, 0, 1],
            [UInt8](repeating: 0, count: 15) + [1],  // ::1
            [0xfd] + [UInt8](repeating: 0, count: 15),  // fd00::
            [0xfe, 0x80] + [UInt8](repeating: 0, count: 14),  // fe80::
            [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 127, 0, 0, 1],  // ::ffff:127.0.0.1
        ] {
            #expect(policy.refusal(ofAddress: address) != nil, "\(address)")
        }
        for address: [UInt8] in [
            [93, 184, 216, 34], [8, 8, 8, 8], [172, 32, 0, 1], [100, 128, 0, 1],
            [0x26, 0x06, 0x28, 0x00] + [UInt8](repeating: 0, count: 12),
        ] {
            #expect(policy.refusal(ofAddress: address) == nil, "\(address)")
        }
        #expect(WebhookURLPolicy(allowsPrivateNetworks: true).refusal(ofAddress: [127, 0, 0, 1]) == nil)
    }

    @Test func checksURLsSchemeHostAndLiteralAddresses() {
        let policy = WebhookURLPolicy()
        #expect(policy.problem(with: "https://hooks.example.com/deliveryd") == nil)
        #expect(policy.problem(with: "http://hooks.example.com/") == "must be an https URL")
        #expect(policy.problem(with: "ftp://hooks.example.com/") != nil)
        #expect(policy.problem(with: "hooks.example.com") != nil)
        #expect(policy.problem(with: "https://user:secret@hooks.example.com/") != nil)
        #expect(policy.problem(with: "https://127.0.0.1/") != nil)
        #expect(policy.problem(with: "https://[::1]:8443/") != nil)
        #expect(policy.problem(with: "https://169.254.169.254/latest/meta-data") != nil)
        #expect(policy.problem(with: "https://localhost/") != nil)
        #expect(policy.problem(with: "https://localhost./") != nil)
        let open = WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true)
        #expect(open.problem(with: "http://127.0.0.1:8080/hook") == nil)
        #expect(open.problem(with: "http://localhost:8080/hook") == nil)
    }

    @Test func retriesFollowTheScheduleWithJitterThenGiveUp() {
        let schedule = WebhookRetrySchedule.standard
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(schedule.period > 2.9 * 86_400 && schedule.period < 3.1 * 86_400)
        #expect(schedule.nextAttempt(afterFailed: 1, now: now, jitter: 0) == now.addingTimeInterval(5))
        #expect(schedule.nextAttempt(afterFailed: 1, now: now, jitter: 1) == now.addingTimeInterval(5.5))
        #expect(schedule.nextAttempt(afterFailed: 2, now: now, jitter: -1) == now.addingTimeInterval(54))
        #expect(schedule.nextAttempt(afterFailed: schedule.delays.count, now: now, jitter: 0) != nil)
        #expect(schedule.nextAttempt(afterFailed: schedule.delays.count + 1, now: now, jitter: 0) == nil)
    }
}

@Suite struct RetryAfterTests {
    /// Both forms of RFC 9110: delay seconds, and an HTTP date counted from now.
    @Test func readsSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryAfter.seconds("120", now: now) == 120)
        #expect(RetryAfter.seconds(" 7 ", now: now) == 7)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:50:37 GMT", now: now) == 60)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:40:00 GMT", now: now) == 0, "a past date: at once")
        #expect(RetryAfter.seconds("-5", now: now) == 0)
        #expect(RetryAfter.seconds("soon", now: now) == nil)
        #expect(RetryAfter.seconds("Sun, 06 Foo 1994 08:50:37 GMT", now: now) == nil)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == nil)
    }
}
