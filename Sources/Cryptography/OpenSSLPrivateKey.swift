internal import COpenSSL

/// A PEM private key of one algorithm, the one owner of its `EVP_PKEY`: what the signing keys share.
///
/// - Note: `@unchecked Sendable` is sound here: the `EVP_PKEY` is never mutated after `init`, and every
///   signature or verification uses its own `EVP_MD_CTX`, which OpenSSL documents as safe for a
///   shared, read-only key.
final class OpenSSLPrivateKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Loads a PKCS #8 key, or one in the algorithm's own PEM form, of the type `EVP_PKEY_…` and a
    /// size in `bits`.
    /// - Throws: `CryptoError` if the text is not a PEM private key, or `refusal` if it is another one.
    init(pem: String, type: Int32, bits: ClosedRange<Int32>, refusal: String) throws(CryptoError) {
        let loaded = try Self.read(pem: pem)
        guard EVP_PKEY_get_base_id(loaded) == type, bits.contains(EVP_PKEY_get_bits(loaded)) else {
            EVP_PKEY_free(loaded)
            throw CryptoError(operation: "reading the PEM key", reason: refusal)
        }
        self.pointer = loaded
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    private static func read(pem: String) throws(CryptoError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let loaded: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let loaded else {
            throw CryptoError(operation: "reading the PEM key", reason: CryptoError.lastOpenSSLReason())
        }
        return loaded
    }

    /// The signature of `message` over SHA-256, in OpenSSL's form for the key's algorithm (DER for
    /// ECDSA, the raw block for RSA PKCS #1 v1.5).
    func signSHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError(operation: "signing", reason: "out of memory") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw CryptoError(operation: "signing", reason: CryptoError.lastOpenSSLReason())
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            throw CryptoError(operation: "signing", reason: CryptoError.lastOpenSSLReason())
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw CryptoError(operation: "signing", reason: CryptoError.lastOpenSSLReason())
        }
        return Array(signature.prefix(length))
    }
}
