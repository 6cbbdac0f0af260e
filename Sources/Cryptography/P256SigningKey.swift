internal import COpenSSL

/// An ECDSA P-256 private key, loaded from the PEM text of an APNs `.p8` file, that signs ES256.
public struct P256SigningKey: Sendable {
    private let key: OpenSSLPrivateKey

    /// Loads a PKCS #8 (`-----BEGIN PRIVATE KEY-----`) or SEC 1 (`BEGIN EC PRIVATE KEY`) P-256 key.
    /// - Throws: `CryptoError` if the text is not a PEM private key or the curve is not P-256.
    public init(pem: String) throws(CryptoError) {
        key = try OpenSSLPrivateKey(
            pem: pem, type: EVP_PKEY_EC, bits: 256...256, refusal: "not a P-256 (prime256v1) EC key")
    }

    /// Signs `message` with ECDSA over SHA-256 and returns the JWS form: r ‖ s, 32 bytes each.
    ///
    /// OpenSSL produces a DER `ECDSA-Sig-Value`; JWS (RFC 7518 §3.4) wants the fixed-width raw pair,
    /// which is what APNs verifies.
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try Self.rawSignature(fromDER: key.signSHA256(message))
    }

    /// Checks an r ‖ s signature against this key's public half.
    public func verifyES256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 64, let der = Self.derSignature(fromRaw: signature),
            let context = EVP_MD_CTX_new()
        else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else { return false }
        return EVP_DigestVerify(context, der, der.count, message, message.count) == 1
    }

    private static func rawSignature(fromDER der: [UInt8]) throws(CryptoError) -> [UInt8] {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else {
            throw CryptoError(operation: "decoding the signature", reason: CryptoError.lastOpenSSLReason())
        }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 64)
        let written = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(ECDSA_SIG_get0_r(signature), buffer.baseAddress, 32)
                + BN_bn2binpad(ECDSA_SIG_get0_s(signature), buffer.baseAddress! + 32, 32)
        }
        guard written == 64 else { throw CryptoError(operation: "decoding the signature", reason: "r or s too long") }
        return raw
    }

    private static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw, 32, nil)
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return der
    }

}
