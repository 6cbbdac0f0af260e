internal import COpenSSL

/// HMAC-SHA256 (RFC 2104), the message authentication code webhook signatures use.
public enum HMACSHA256 {
    /// The 32-byte code of `message` under `key`.
    public static func authenticationCode(key: [UInt8], message: some Collection<UInt8>) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        let contiguous = Array(message)
        key.withUnsafeBufferPointer { keyBytes in
            contiguous.withUnsafeBufferPointer { input in
                output.withUnsafeMutableBufferPointer { out in
                    // One-shot HMAC fails only on an OpenSSL fault, never on a key or message length.
                    let result = HMAC(
                        EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count), input.baseAddress, input.count,
                        out.baseAddress, &length)
                    precondition(result != nil && length == SHA256_DIGEST_LENGTH, "HMAC(SHA-256) failed")
                }
            }
        }
        return output
    }
}
