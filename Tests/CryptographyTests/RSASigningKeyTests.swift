import Foundation
import Testing

@testable import Cryptography

@Suite("RS256 signatures (FCM's service-account assertions)")
struct RSASigningKeyTests {
    /// Runs a shell script in `directory`; returns its status.
    @discardableResult
    static func shell(_ script: String, in directory: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "cd '\(directory)' && " + script]
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// A signature verifies with OpenSSL's own command line against the public key, and a changed
    /// message does not.
    @Test func signaturesVerifyWithOpenSSL() throws {
        let directory = NSTemporaryDirectory() + "rsa-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #require(
            try Self.shell("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem", in: directory)
                == 0)
        let key = try RSASigningKey(pem: String(contentsOfFile: directory + "/key.pem", encoding: .utf8))
        let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0".utf8)
        let signature = try key.signRS256(message)
        #expect(signature.count == 256)
        try Data(message).write(to: URL(fileURLWithPath: directory + "/message"))
        try Data(signature).write(to: URL(fileURLWithPath: directory + "/signature"))
        try key.publicKeyPEM.write(toFile: directory + "/public.pem", atomically: true, encoding: .utf8)
        let verify = "openssl dgst -sha256 -verify public.pem -signature signature message"
        #expect(try Self.shell(verify, in: directory) == 0)
        try Data(message + [0x2E]).write(to: URL(fileURLWithPath: directory + "/message"))
        #expect(try Self.shell(verify, in: directory) != 0)
    }

    /// Keys that cannot sign RS256 for Google are refused when loaded: an EC key, a short RSA key, junk.
    @Test func unsuitableKeysAreRefused() throws {
        let directory = NSTemporaryDirectory() + "rsa-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #require(
            try Self.shell(
                "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out ec.pem && "
                    + "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out short.pem", in: directory) == 0
        )
        for file in ["ec.pem", "short.pem"] {
            let pem = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            #expect(throws: CryptoError.self) { try RSASigningKey(pem: pem) }
        }
        #expect(throws: CryptoError.self) { try RSASigningKey(pem: "not a key") }
    }
}
