internal import COpenSSL

/// HMAC-SHA256 (RFC 2104), the message authentication code webhook signatures use.
public enum HMACSHA256 {
    /// The 32-byte code of `message` under `key`.
    public static func authenticationCode(key: [UInt8], message: some Collection<UInt8>) -> [UInt8] {
        Key(key).authenticationCode(Array(message))
    }

    /// A key ready to sign many messages. The key's two padded blocks are hashed once; each message
    /// starts from copies of those two states. (OpenSSL's one-shot `HMAC` looks SHA-256 up in its
    /// providers and hashes both blocks again on every call: a third of a webhook's signing time.)
    ///
    /// - Important: Not `Sendable`: signing writes the scratch state, so one owner signs with it.
    ///   It stands for the secret, so keep it no longer than the secret itself would be kept.
    public final class Key {
        private let inner: OpaquePointer
        private let outer: OpaquePointer
        private let scratch: OpaquePointer

        public init(_ key: [UInt8]) {
            var block = key.count > Self.blockSize ? SHA256.digest(key) : key
            block += repeatElement(0, count: Self.blockSize - block.count)
            inner = Self.state(absorbing: block.map { $0 ^ 0x36 })
            outer = Self.state(absorbing: block.map { $0 ^ 0x5c })
            scratch = Self.newContext()
        }

        deinit {
            EVP_MD_CTX_free(inner)
            EVP_MD_CTX_free(outer)
            EVP_MD_CTX_free(scratch)
        }

        /// The 32-byte code of `message`.
        public func authenticationCode(_ message: [UInt8]) -> [UInt8] {
            let innerDigest = finish(from: inner, message)
            return finish(from: outer, innerDigest)
        }

        private func finish(from state: OpaquePointer, _ bytes: [UInt8]) -> [UInt8] {
            var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
            var length: UInt32 = 0
            let ok = bytes.withUnsafeBufferPointer { input in
                EVP_MD_CTX_copy_ex(scratch, state) == 1
                    && EVP_DigestUpdate(scratch, input.baseAddress, input.count) == 1
                    && EVP_DigestFinal_ex(scratch, &digest, &length) == 1
            }
            // Copying and hashing in memory fail only on an OpenSSL fault (out of memory).
            precondition(ok && length == SHA256_DIGEST_LENGTH, "HMAC(SHA-256) failed")
            return digest
        }

        private static let blockSize = 64

        private static func newContext() -> OpaquePointer {
            guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
            return context
        }

        private static func state(absorbing block: [UInt8]) -> OpaquePointer {
            let context = newContext()
            let ok =
                EVP_DigestInit_ex(context, SHA256.algorithm.pointer, nil) == 1
                && EVP_DigestUpdate(context, block, block.count) == 1
            precondition(ok, "SHA-256 init failed")
            return context
        }
    }
}
