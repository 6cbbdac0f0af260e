import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The local FCM simulator (Tests/fcm-simulator/simulator.py under hypercorn, HTTP/2 over TLS with a
/// CA made for the run): an OAuth 2 token endpoint that verifies the RS256 assertion with PyJWT, and
/// the HTTP v1 send API. It makes a service account of its own (a fresh 2,048-bit RSA key), whose
/// key file `serviceAccountJSON` holds, pointing at the simulator's token endpoint.
package final class FCMSimulator {
    package static let projectID = "deliveryd-test"
    package static let clientEmail = "pusher@deliveryd-test.iam.gserviceaccount.com"

    package let directory: String
    package private(set) var port: UInt16 = 0
    private var process = Process()

    package var baseURL: String { "https://127.0.0.1:\(port)" }
    package var tokenURL: String { baseURL + "/token" }
    package var caFile: String { directory + "/ca.pem" }
    package var controlFile: String { directory + "/control.json" }

    /// The service-account key file, as the Firebase console downloads it.
    package var serviceAccountJSON: [UInt8] {
        let key = (try? String(contentsOfFile: directory + "/account.pem", encoding: .utf8)) ?? ""
        let object: [String: Any] = [
            "type": "service_account", "project_id": Self.projectID, "private_key_id": "test-key-1",
            "private_key": key, "client_email": Self.clientEmail, "token_uri": tokenURL,
        ]
        return Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }

    /// - Parameters:
    ///   - tokenLifetime: seconds an access token is valid (default an hour, as Google's).
    ///   - droppable: serve behind a relay, so that a token scripted `["drop_once": true]` cuts every
    ///     client connection when its first request arrives.
    package init(tokenLifetime: Int = 3600, droppable: Bool = false) throws {
        directory = NSTemporaryDirectory() + "fcm-sim-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "{}".write(toFile: controlFile, atomically: true, encoding: .utf8)
        try APNsSimulator.shell(
            """
            set -e
            cd '\(directory)'
            openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out account.pem 2>/dev/null
            openssl pkey -in account.pem -pubout -out account.pub 2>/dev/null
            """
        )
        try TestPeers.makeServerCertificate(in: directory)
        (process, port) = try TestPeers.start(
            "fcm-simulator/simulator.py", name: "the FCM simulator", directory: directory
        ) { port in
            [
                "--port", String(port), "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                "--account-public-key", directory + "/account.pub", "--client-email", Self.clientEmail,
                "--project", Self.projectID, "--record", directory + "/record.jsonl", "--control", controlFile,
                "--token-lifetime", String(tokenLifetime),
            ] + (droppable ? ["--droppable"] : [])
        }
    }

    deinit { stop() }

    /// Kills the simulator at once and removes its files.
    package func stop() {
        TestPeers.kill(process)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Scripts the answers for registration tokens: token → {"status", "code", "retry_after",
    /// "invalid_token", "drop_once"}.
    package func script(_ answers: [String: [String: Any]]) throws {
        try JSONSerialization.data(withJSONObject: answers).write(to: URL(fileURLWithPath: controlFile))
    }

    /// Every request the simulator answered (tokens granted, messages sent or refused), in order.
    package func records() throws -> [[String: Any]] {
        try APNsSimulator.completeLines(directory + "/record.jsonl").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
    }
}
