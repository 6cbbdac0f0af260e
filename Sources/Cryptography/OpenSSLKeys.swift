internal import COpenSSL

/// What the signing keys share: reading a PEM private key, and a signature over SHA-256.
enum OpenSSLKeys {
    /// The `EVP_PKEY` of a PEM private key (PKCS #8, or the algorithm's own form); the caller frees it.
    /// - Throws: `CryptoError` if the text is not a PEM private key.
    static func privateKey(pem: String) throws(CryptoError) -> OpaquePointer {
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

    /// `key`'s signature of `message` over SHA-256, in OpenSSL's form for the key's algorithm (DER
    /// for ECDSA, the raw block for RSA PKCS #1 v1.5).
    static func signSHA256(_ message: [UInt8], with key: OpaquePointer) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError(operation: "signing", reason: "out of memory") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
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
