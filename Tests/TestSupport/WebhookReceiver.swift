import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A merchant's webhook receiver (Tests/webhook-receiver/receiver.py, plain HTTP on loopback), which
/// verifies each delivery with the reference `standardwebhooks` library and records it.
package final class WebhookReceiver {
    package let directory: String
    package private(set) var port: UInt16 = 0
    private var process = Process()

    package let isTLS: Bool

    package var url: String { "\(isTLS ? "https" : "http")://127.0.0.1:\(port)/hooks" }
    /// The CA that signed an HTTPS receiver's certificate.
    package var caFile: String { directory + "/ca.pem" }

    /// - Parameter tls: HTTPS with a certificate of its own CA (`caFile`), offering HTTP/2 and
    ///   HTTP/1.1 as most receivers do (it speaks only HTTP/1.1; each record says which was agreed).
    package init(tls: Bool = false) throws {
        directory = NSTemporaryDirectory() + "webhook-receiver-" + UUID().uuidString
        isTLS = tls
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if tls { try TestPeers.makeServerCertificate(in: directory) }
        try control([:])
        try trust([])
        let directory = directory
        (process, port) = try TestPeers.start(
            "webhook-receiver/receiver.py", name: "the webhook receiver", directory: directory
        ) { port in
            [
                "--port", String(port), "--record", directory + "/record.jsonl", "--control",
                directory + "/control.json", "--secrets", directory + "/secrets.json",
            ] + (tls ? ["--tls-directory", directory] : [])
        }
    }

    deinit { stop() }

    package func stop() {
        TestPeers.kill(process)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// How the next requests are answered: `status`, `retry_after`, `hang_seconds`, `location`,
    /// `headers` (more response headers).
    package func control(_ answer: [String: Any]) throws {
        try JSONSerialization.data(withJSONObject: answer).write(to: URL(fileURLWithPath: directory + "/control.json"))
    }

    /// The `whsec_…` secrets deliveries are verified with (any one suffices).
    package func trust(_ secrets: [String]) throws {
        try JSONSerialization.data(withJSONObject: secrets).write(to: URL(fileURLWithPath: directory + "/secrets.json"))
    }

    /// Every request received, in order: `headers`, `body`, `verified`, `verified_with`, `status`,
    /// `alpn` (HTTPS: the protocol agreed).
    package func records() -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: directory + "/record.jsonl", encoding: .utf8) else { return [] }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // a line still being written has no newline yet
        return lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The body of each request, decoded.
    package func events() -> [[String: Any]] {
        records().compactMap {
            (try? JSONSerialization.jsonObject(with: Data(($0["body"] as? String ?? "").utf8))) as? [String: Any]
        }
    }

    /// Waits until `condition` holds of the records (polling; `timeout` only bounds a failure).
    package func wait(timeout: Double = 30, until condition: ([[String: Any]]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(records()) { return true }
            usleep(50_000)
        }
        return condition(records())
    }
}
