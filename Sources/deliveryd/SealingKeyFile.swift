import Cryptography
import Foundation

/// The key that seals the kept replies of idempotent requests, in a file of its own: never in the
/// database, so never in a backup of it.
///
/// The file holds 64 hex digits. It is created (mode 0600) on first start; later starts must find
/// the same key, or the replies kept in the last 24 hours can no longer be replayed.
enum SealingKeyFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func loadOrCreate(at path: String) throws(Failure) -> SealingKey {
        let manager = FileManager.default
        if !manager.fileExists(atPath: path) {
            let key = SealingKey.generate()
            let text = Hex.encode(key.rawBytes) + "\n"
            guard manager.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            else { throw Failure(description: "cannot create the sealing key file \(path)") }
            return key
        }
        guard let data = manager.contents(atPath: path) else {
            throw Failure(description: "cannot read the sealing key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex, let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex),
            let byte = UInt8(text[index..<next], radix: 16)
        {
            bytes.append(byte)
            index = next
        }
        guard index == text.endIndex, let key = try? SealingKey(bytes: bytes) else {
            throw Failure(description: "\(path) is not a sealing key (64 hex digits)")
        }
        return key
    }
}
