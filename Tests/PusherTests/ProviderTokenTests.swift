import Cryptography
import Foundation
import Pusher
import TestSupport
import Testing

/// A P-256 key made for these tests only; it signs nothing outside them.
@Suite("ES256 provider token")
struct ProviderTokenTests {
    /// A minted token has ES256/kid header, iss/iat claims with iat a number, and a 64-byte r‖s
    /// signature that verifies over `header.claims`.
    @Test func tokenShapeAndSignature() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let issuedAt = Date(timeIntervalSince1970: 1_796_212_800)
        let token = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: issuedAt, key: key)
        let parts = token.compact.split(separator: ".").map(String.init)
        try #require(parts.count == 3)

        let header = try #require(Base64URL.decode(parts[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        let claims = try #require(Base64URL.decode(parts[1]))
        #expect(String(decoding: claims, as: UTF8.self) == #"{"iat":1796212800,"iss":"DEF123GHIJ"}"#)

        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        #expect(!parts.joined().contains("="))
        #expect(key.verifyES256(signature: signature, message: Array("\(parts[0]).\(parts[1])".utf8)))
    }

    /// A signature does not verify over a changed message or when a byte of it is flipped.
    @Test func tamperingIsDetected() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let message = Array("header.claims".utf8)
        var signature = try key.signES256(message)
        #expect(key.verifyES256(signature: signature, message: message))
        #expect(!key.verifyES256(signature: signature, message: Array("header.claimz".utf8)))
        signature[10] ^= 0x01
        #expect(!key.verifyES256(signature: signature, message: message))
    }

    /// Text that is not a P-256 private key is refused with a reason, not a crash.
    @Test(arguments: ["", "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n", rsaKeyPEM])
    func badKeysAreRefused(pem: String) {
        #expect(throws: CryptoError.self) { try P256SigningKey(pem: pem) }
    }

    /// Base64url round-trips every length, with no padding and no `+` or `/`.
    @Test func base64URLRoundTrip() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
    }
}

/// An RSA key: valid PEM, wrong algorithm for APNs.
let rsaKeyPEM = """
    -----BEGIN PRIVATE KEY-----
    MIIBUwIBADANBgkqhkiG9w0BAQEFAASCAT0wggE5AgEAAkEArxWW04UUSIbVYk5H
    daHV+t6QlEa+XmzpGz8wuvXWDGxtuQ6RW0/VPeP7x1lTZHNY9/ZA4Gs5+YmevvU4
    1WQf5QIDAQABAkBs4C4EpvLwDvjOwwLpAZSBBro9mqhzK6Lh0K/K82kCG7tX7oj+
    y2ST9zTpqY24F2GCBxjTsjN0CgH5wtfDhvFZAiEA4g3V2o3O5OS7IWnck2RJXTq7
    QH5vW8xaTQmHJ1c79asCIQDGRzgnzNxKKqB8lo8VZRO/wPIEP0pa/X+V0+cxZqWQ
    rwIgIi6hZdkHrgkAWv8dAZSqm1RkOE5mHGV8SiXksAg64t0CIB+j2cgwHq8PIlD/
    TZHicUZWKciXuOvQK/3itK/ja2QtAiBXd0fk+GwfvYSSRvEsCndrE70o5RdECck4
    oZlRKVSWiw==
    -----END PRIVATE KEY-----
    """
