import Cryptography
import Testing

@Suite("Sealing with AES-256-GCM")
struct SealingKeyTests {
    /// What is sealed opens with the same key and context, and the sealed bytes do not contain it.
    @Test(arguments: [0, 1, 15, 16, 17, 4096])
    func roundTrip(length: Int) throws {
        let key = SealingKey.generate()
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
        let sealed = try key.seal(plaintext, context: Array("key:k1\u{1F}abc".utf8))
        #expect(sealed.count == length + 28)
        #expect(try key.open(sealed, context: Array("key:k1\u{1F}abc".utf8)) == plaintext)
        if length >= 16 { #expect(sealed.firstRange(of: plaintext.prefix(16)) == nil) }
    }

    /// Another key, another context, or one flipped bit: nothing opens.
    @Test func tamperingIsDetected() throws {
        let key = SealingKey.generate()
        let sealed = try key.seal(Array("dt_secret tracking token".utf8), context: [1])
        #expect(throws: CryptoError.self) { try SealingKey.generate().open(sealed, context: [1]) }
        #expect(throws: CryptoError.self) { try key.open(sealed, context: [2]) }
        for index in [0, 12, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(throws: CryptoError.self) { try key.open(altered, context: [1]) }
        }
        #expect(throws: CryptoError.self) { try key.open([1, 2, 3], context: [1]) }
        #expect(throws: CryptoError.self) { try SealingKey(bytes: [0, 1]) }
    }
}
