import Cryptography
import Foundation

// The names of CryptoKit's (and swift-crypto's) HMAC API that the documented verifier uses, over this
// package's HMAC-SHA256, so that the snippet merchants copy is compiled and run by these tests.

struct SymmetricKey {
    let data: Data
    init(data: Data) { self.data = data }
}

enum SHA256 {}

enum HMAC<Hash> {
    static func authenticationCode(for message: Data, using key: SymmetricKey) -> [UInt8] {
        HMACSHA256.authenticationCode(key: Array(key.data), message: Array(message))
    }
}
