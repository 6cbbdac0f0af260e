internal import COpenSSL

/// An RSA private key, loaded from the PEM text of a Google service-account key, that signs RS256
/// (RSASSA-PKCS1-v1_5 over SHA-256): the assertion FCM's token endpoint exchanges for access tokens.
///
public struct RSASigningKey: Sendable {
    private let key: OpenSSLPrivateKey

    /// Loads a PKCS #8 (`-----BEGIN PRIVATE KEY-----`, as service-account files hold it) or PKCS #1
    /// (`BEGIN RSA PRIVATE KEY`) key of at least 2,048 bits.
    /// - Throws: `CryptoError` if the text is not a PEM private key, not RSA, or too short.
    public init(pem: String) throws(CryptoError) {
        key = try OpenSSLPrivateKey(
            pem: pem, type: EVP_PKEY_RSA, bits: 2048...Int32.max, refusal: "not an RSA key of 2,048 bits or more")
    }

    /// Signs `message` with RSASSA-PKCS1-v1_5 over SHA-256: the JWS `RS256` signature (RFC 7518 §3.3).
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.signSHA256(message)
    }

    /// The public half as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo): what a verifier is given.
    public var publicKeyPEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, key.pointer) == 1 else { return "" }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let read = BIO_read(bio, &bytes, Int32(bytes.count))
        return String(decoding: bytes.prefix(Int(max(0, read))), as: UTF8.self)
    }
}
