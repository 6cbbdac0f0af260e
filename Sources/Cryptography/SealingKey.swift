internal import COpenSSL

/// A 256-bit key that seals data with AES-256-GCM: private, and tamper-evident.
///
/// deliveryd keeps such a key outside its database so that what must sit in the database for a
/// while (the replay of an idempotent request, which carries a tracking token and the customer's
/// contact details) is unreadable in the file and in every backup of it.
public struct SealingKey: Sendable {
    /// Key bytes. Value type, never logged; `description` is deliberately not provided.
    private let bytes: [UInt8]

    public static let byteCount = 32
    private static let nonceCount = 12
    private static let tagCount = 16

    /// - Throws: `CryptoError` unless `bytes` are exactly 32.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else {
            throw CryptoError(operation: "SealingKey", reason: "a key is \(Self.byteCount) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// A new random key.
    public static func generate() -> SealingKey {
        // 32 bytes from the CSPRNG are a valid key by construction.
        try! SealingKey(bytes: SecureRandom.bytes(byteCount))
    }

    /// The key's bytes, for storing it in its own file.
    public var rawBytes: [UInt8] { bytes }

    /// `nonce ‖ ciphertext ‖ tag`. `context` (not secret, not stored) must be given again to open it:
    /// it binds the sealed bytes to where they belong, so they cannot be moved to another row.
    public func seal(_ plaintext: [UInt8], context: [UInt8]) throws(CryptoError) -> [UInt8] {
        let nonce = SecureRandom.bytes(Self.nonceCount)
        var output = nonce + [UInt8](repeating: 0, count: plaintext.count + Self.tagCount)
        try run(encrypt: true, nonce: nonce, input: plaintext, context: context) {
            context, input, length throws(CryptoError) in
            try output.withUnsafeMutableBufferPointer { out throws(CryptoError) in
                let body = out.baseAddress! + Self.nonceCount
                var written: Int32 = 0
                guard EVP_EncryptUpdate(context, body, &written, input, length) == 1,
                    EVP_EncryptFinal_ex(context, body + Int(written), &written) == 1,
                    EVP_CIPHER_CTX_ctrl(
                        context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagCount), body + plaintext.count) == 1
                else { throw Self.failure("AES-GCM seal") }
            }
        }
        return output
    }

    /// The plaintext of `sealed`.
    /// - Throws: `CryptoError` when it was sealed with another key or context, or altered.
    public func open(_ sealed: [UInt8], context: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= Self.nonceCount + Self.tagCount else {
            throw CryptoError(operation: "AES-GCM open", reason: "too short to be sealed")
        }
        let nonce = Array(sealed.prefix(Self.nonceCount))
        let body = Array(sealed[Self.nonceCount..<(sealed.count - Self.tagCount)])
        var tag = Array(sealed.suffix(Self.tagCount))
        var output = [UInt8](repeating: 0, count: body.count)
        try run(encrypt: false, nonce: nonce, input: body, context: context) {
            context, input, length throws(CryptoError) in
            try output.withUnsafeMutableBufferPointer { out throws(CryptoError) in
                var written: Int32 = 0
                guard EVP_DecryptUpdate(context, out.baseAddress, &written, input, length) == 1,
                    EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagCount), &tag) == 1,
                    EVP_DecryptFinal_ex(context, out.baseAddress! + Int(written), &written) == 1
                else {
                    throw CryptoError(operation: "AES-GCM open", reason: "wrong key or context, or altered")
                }
            }
        }
        return output
    }

    /// Sets up a cipher context with key, nonce and context as associated data, then hands it over.
    private func run(
        encrypt: Bool, nonce: [UInt8], input: [UInt8], context associated: [UInt8],
        _ body: (OpaquePointer, UnsafePointer<UInt8>, Int32) throws(CryptoError) -> Void
    ) throws(CryptoError) {
        guard let context = EVP_CIPHER_CTX_new() else { throw Self.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        let setUp = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex
        let update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate
        var ignored: Int32 = 0
        guard setUp(context, EVP_aes_256_gcm(), nil, bytes, nonce) == 1,
            associated.isEmpty || update(context, nil, &ignored, associated, Int32(associated.count)) == 1
        else { throw Self.failure("AES-GCM setup") }
        // An empty input still needs a valid pointer for the update calls.
        let padded = input.isEmpty ? [0] : input
        try padded.withUnsafeBufferPointer { buffer throws(CryptoError) in
            try body(context, buffer.baseAddress!, Int32(input.count))
        }
    }

    private static func failure(_ operation: String) -> CryptoError {
        CryptoError(operation: operation, reason: "OpenSSL error \(ERR_get_error())")
    }
}
