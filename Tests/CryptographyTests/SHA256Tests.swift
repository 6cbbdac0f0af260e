import Cryptography
import Testing

@Suite("SHA-256, hex and secrets")
struct SHA256Tests {
    /// The digests match the FIPS 180-2 test vectors, so stored key hashes are real SHA-256.
    @Test func knownAnswers() {
        #expect(
            SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// Constant-time comparison agrees with `==`, including different lengths.
    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals(Array("secret".utf8), Array("secret".utf8)))
        #expect(!ConstantTime.equals(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!ConstantTime.equals(Array("secret".utf8), Array("secrets".utf8)))
    }

    /// Random tokens have the asked length and do not repeat.
    @Test func randomTokens() {
        let tokens = Set((0..<100).map { _ in SecureRandom.hexToken(byteCount: 16) })
        #expect(tokens.count == 100)
        #expect(tokens.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
    }
}
