import Foundation
import TestSupport
import Testing

/// docs/webhooks.md shows merchants a Swift verifier; the tests run a copy of it
/// (DocumentedVerifier.swift). The two must be the same text, or the tests prove nothing of the docs.
@Suite struct DocumentedVerifierTests {
    /// From `func verifyWebhook` to the first line that is only `}`.
    static func function(in text: String) -> String? {
        guard let start = text.range(of: "func verifyWebhook(") else { return nil }
        let rest = text[start.lowerBound...]
        guard let end = rest.range(of: "\n}\n") else { return nil }
        return String(rest[..<end.upperBound])
    }

    @Test func theDocumentedVerifierIsTheOneTested() throws {
        let root = APNsSimulator.repositoryRoot
        let documented = try String(contentsOf: root.appendingPathComponent("docs/webhooks.md"), encoding: .utf8)
        let tested = try String(
            contentsOf: root.appendingPathComponent("Tests/WebhooksTests/DocumentedVerifier.swift"), encoding: .utf8)
        let copy = try #require(Self.function(in: tested))
        #expect(Self.function(in: documented) == copy, "docs/webhooks.md's verifyWebhook differs from the tested copy")
    }

    /// The specification's own example verifies, at its time and not an hour later.
    @Test func verifiesTheSpecificationsExample() {
        let headers = [
            "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
            "webhook-signature":
                "v1,bm9ldHUjKzFob2VudXRob2VodWUzMjRvdWVvdW9ldQo= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ]
        let body = Data(#"{"test": 2432232314}"#.utf8)
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        let then = Date(timeIntervalSince1970: 1_614_265_330)
        #expect(verifyWebhook(secret: secret, headers: headers, body: body, now: then))
        #expect(!verifyWebhook(secret: secret, headers: headers, body: body, now: then.addingTimeInterval(3600)))
        var forged = headers
        forged["webhook-timestamp"] = "1614265331"
        #expect(!verifyWebhook(secret: secret, headers: forged, body: body, now: then))
    }
}
