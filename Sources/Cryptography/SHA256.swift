internal import COpenSSL

/// SHA-256 digests, for storing secrets (API keys, tracking tokens) and fingerprinting request bodies.
public enum SHA256 {
    /// SHA-256 looked up once in OpenSSL's default provider: `EVP_sha256()` makes every digest
    /// search the providers again (a lock and a lookup per call in OpenSSL 3).
    static let algorithm = FetchedDigest("SHA256")

    /// The 32-byte digest of `bytes` (an array, like `Hex.encode`, so that callers in other modules
    /// do not run it unspecialized).
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                // One-shot EVP_Digest never fails for SHA-256 on valid buffers; a failure is an OpenSSL bug.
                let result = EVP_Digest(input.baseAddress, input.count, out.baseAddress, nil, algorithm.pointer, nil)
                precondition(result == 1, "EVP_Digest(SHA-256) failed")
            }
        }
        return output
    }

    /// The digest as 64 lowercase hex digits, the form the database stores.
    public static func hexDigest(_ bytes: [UInt8]) -> String {
        Hex.encode(digest(bytes))
    }
}

/// A digest algorithm fetched from OpenSSL's default provider, kept for the life of the process.
///
/// - Note: `@unchecked Sendable` is sound: a fetched `EVP_MD` is immutable and reference-counted,
///   and OpenSSL lets any number of threads use it at once.
final class FetchedDigest: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ name: String) {
        guard let pointer = EVP_MD_fetch(nil, name, nil) else { fatalError("OpenSSL has no \(name)") }
        self.pointer = pointer
    }
}

/// Lowercase hexadecimal text of bytes.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// An array, not any collection: called from other modules, a generic version runs
    /// unspecialized, and every authenticated request encodes a digest.
    public static func encode(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { text in
            for (index, byte) in bytes.enumerated() {
                text[2 * index] = digits[Int(byte >> 4)]
                text[2 * index + 1] = digits[Int(byte & 0x0F)]
            }
            return bytes.count * 2
        }
    }
}

/// Secrets compared without leaking, through timing, how many leading bytes matched.
public enum ConstantTime {
    /// Whether `a` and `b` are equal; the time depends only on their lengths.
    ///
    /// Arrays, not any collection: a generic function called from another module runs unspecialized,
    /// every byte through a witness table, and every authenticated request calls this (it was 2 % of
    /// the machine's samples under load).
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        a.withUnsafeBufferPointer { left in
            b.withUnsafeBufferPointer { right in
                for index in 0..<left.count { difference |= left[index] ^ right[index] }
            }
        }
        return difference == 0
    }
}

/// Random secrets from the operating system's CSPRNG (`getrandom` on Linux).
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A random token of `byteCount` bytes as lowercase hex, e.g. for API keys and tracking tokens.
    public static func hexToken(byteCount: Int = 32) -> String {
        Hex.encode(bytes(byteCount))
    }
}
