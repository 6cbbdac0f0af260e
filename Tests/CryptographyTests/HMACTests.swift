import Cryptography
import Testing

@Suite struct HMACTests {
    /// RFC 4231, test cases 1 and 2: a short key, and a key shorter than the block with a longer message.
    @Test func matchesTheRFC4231Vectors() {
        let first = HMACSHA256.authenticationCode(
            key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
        #expect(Hex.encode(first) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let second = HMACSHA256.authenticationCode(
            key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(second) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    /// RFC 4231, test case 6: a key longer than the block is hashed first.
    @Test func hashesKeysLongerThanTheBlock() {
        let code = HMACSHA256.authenticationCode(
            key: [UInt8](repeating: 0xaa, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        #expect(Hex.encode(code) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    /// A kept key signs message after message from its saved states: each code is the one-shot
    /// code of its own message, whatever was signed before (RFC 4231, test cases 2 and 6).
    @Test func aKeptKeySignsManyMessagesAlike() {
        let key = HMACSHA256.Key(Array("Jefe".utf8))
        let message = Array("what do ya want for nothing?".utf8)
        for _ in 0..<3 {
            #expect(
                Hex.encode(key.authenticationCode(message))
                    == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
            #expect(key.authenticationCode([]) == HMACSHA256.authenticationCode(key: Array("Jefe".utf8), message: []))
        }
        let long = HMACSHA256.Key([UInt8](repeating: 0xaa, count: 131))
        #expect(
            Hex.encode(long.authenticationCode(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
