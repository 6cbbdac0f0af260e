import Foundation

// The Swift verifier of docs/webhooks.md, character for character from `func verifyWebhook` to its
// closing brace (DocumentedVerifierTests checks that they are the same). It is written for CryptoKit
// (Apple platforms) or swift-crypto's `Crypto` (Linux): CryptoKitShape.swift gives these tests the
// few names of that API it uses, over this package's HMAC.

func verifyWebhook(secret: String, headers: [String: String], body: Data, now: Date = Date()) -> Bool {
    guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))),
        let id = headers["webhook-id"], let timestamp = headers["webhook-timestamp"].flatMap({ Int($0) }),
        let signatures = headers["webhook-signature"]
    else { return false }
    // A message more than five minutes old or ahead is refused: a captured request replayed later is not news.
    guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= 300 else { return false }
    var signed = Data("\(id).\(timestamp).".utf8)
    signed.append(body)
    let expected = Data(HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key)))
    // Several signatures during a secret rotation, separated by spaces: one that verifies is enough.
    return signatures.split(separator: " ").contains { candidate in
        guard candidate.hasPrefix("v1,"), let given = Data(base64Encoded: String(candidate.dropFirst(3))),
            given.count == expected.count
        else { return false }
        // Compared in constant time, so the time taken tells an attacker nothing of the expected value.
        return zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
