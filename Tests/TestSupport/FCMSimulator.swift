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
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
                -days 1 -subj /CN=deliveryd-test-ca 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
                -subj /CN=127.0.0.1 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
                -extfile san.ext 2>/dev/null
            """
        )
        let python = try APNsSimulator.testPython()
        // As the APNs simulator: below the ephemeral range; a taken port makes it exit, and the next
        // try takes another.
        for attempt in 1...3 {
            port = UInt16.random(in: 10_000...20_999)
            process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments =
                [
                    APNsSimulator.repositoryRoot.appendingPathComponent("Tests/fcm-simulator/simulator.py").path,
                    "--port", String(port), "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                    "--account-public-key", directory + "/account.pub", "--client-email", Self.clientEmail,
                    "--project", Self.projectID, "--record", directory + "/record.jsonl", "--control", controlFile,
                    "--token-lifetime", String(tokenLifetime),
                ] + (droppable ? ["--droppable"] : [])
            do {
                try APNsSimulator.launch(process, port: port, name: "the FCM simulator")
                return
            } catch  where attempt < 3 {
                continue
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        }
    }

    deinit { stop() }

    /// Kills the simulator at once (a graceful stop would wait for the client's idle connection).
    package func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
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
