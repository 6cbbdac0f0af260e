package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A second P-256 key for tests only: the key of another (white-label) app.
package let secondTestKeyPEM = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghdXQYUuPcrHMOJjd
    vPbcgK3O4w2ANN/ma6x5giFHISChRANCAARUs0KyluxFgjg96qf1/IyOwrWL2aKq
    WKCiEIFHPXaKtMcA5Cm7T9lQKhUrLT5XacYREl6gFH13KfJWCWanqcCA
    -----END PRIVATE KEY-----
    """

/// A P-256 key for tests only: the simulator verifies provider tokens signed with it.
package let testKeyPEM = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg3bED8GqJPfYocb/y
    tO6p2qxkYPTuMID2tDuRHg5MbcyhRANCAAQ1jwD004QyPuD5pzp9nSph8563LyLb
    aNoXleRRFLy2EgSKlhztODPW+cmsK8iyLBYrJALNMrPhKeuhOirf06CQ
    -----END PRIVATE KEY-----
    """

/// The local APNs simulator (Tests/apns-simulator/simulator.py under hypercorn, HTTP/2 over TLS with
/// a CA made for the run), started as a child process for one test.
package final class APNsSimulator {
    package let directory: String
    package private(set) var port: UInt16 = 0
    package private(set) var process = Process()

    package static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    package var baseURL: String { "https://127.0.0.1:\(port)" }
    package var caFile: String { directory + "/ca.pem" }
    package var controlFile: String { directory + "/control.json" }

    /// - Parameters:
    ///   - privateKeyPEM: the key whose tokens verify for any topic.
    ///   - appKeys: keys bound to one app each, as APNs binds a key to its team's apps.
    ///   - droppable: serve behind a relay, so that a token scripted `["drop_once": true]` cuts every
    ///     client connection when its first request arrives.
    package init(
        publicKeyOf privateKeyPEM: String, appKeys: [(keyID: String, bundleID: String, privateKeyPEM: String)] = [],
        droppable: Bool = false
    ) throws {
        directory = NSTemporaryDirectory() + "apns-sim-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try privateKeyPEM.write(toFile: directory + "/signing.pem", atomically: true, encoding: .utf8)
        try "{}".write(toFile: directory + "/control.json", atomically: true, encoding: .utf8)
        try Self.shell("cd '\(directory)' && openssl pkey -in signing.pem -pubout -out signing.pub 2>/dev/null")
        try TestPeers.makeServerCertificate(in: directory)
        var appKeyArguments: [String] = []
        for (index, appKey) in appKeys.enumerated() {
            try appKey.privateKeyPEM.write(toFile: directory + "/app-\(index).pem", atomically: true, encoding: .utf8)
            try Self.shell("cd '\(directory)' && openssl pkey -in app-\(index).pem -pubout -out app-\(index).pub")
            appKeyArguments += ["--app-key", "\(appKey.keyID):\(appKey.bundleID):\(directory)/app-\(index).pub"]
        }
        (process, port) = try TestPeers.start(
            "apns-simulator/simulator.py", name: "the simulator", directory: directory
        ) { port in
            [
                "--port", String(port), "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                "--public-key", directory + "/signing.pub", "--record", directory + "/record.jsonl",
                "--control", controlFile,
            ] + appKeyArguments + (droppable ? ["--droppable"] : [])
        }
    }

    private func launch() throws { try Self.launch(process, port: port, name: "the simulator") }

    /// The test virtualenv's Python, which `make test` creates.
    package static func testPython() throws -> String {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw SimulatorError("no test virtualenv at \(python): run `make test`, which creates it")
        }
        return python
    }

    /// Starts a test peer and waits until it accepts connections on `port` (20 s at most: a loaded
    /// machine is slow to start Python); throws at once if it exits (its port was taken).
    package static func launch(_ process: Process, port: UInt16, name: String) throws {
        // Another test's server on this port would answer the readiness check below while this peer,
        // unable to bind, exits: the test would then talk to that server (a webhook test once sent a
        // healthy endpoint's deliveries to another test's hanging receiver). A port that answers is
        // refused here, and `TestPeers.start` picks another.
        if accepts(port: port) { throw SimulatorError("\(name): port \(port) is taken") }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<400 {
            if accepts(port: port) { return }
            if !process.isRunning { throw SimulatorError("\(name) exited at start (port \(port) taken?)") }
            usleep(50_000)
        }
        TestPeers.kill(process)
        throw SimulatorError("\(name) did not start listening on \(port)")
    }

    /// Kills the simulator: from now on connections to its port are refused (an outage).
    package func pause() {
        TestPeers.kill(process)
    }

    /// Ends an outage: the simulator listens again on the same port, with the same record and script.
    package func resume() throws { try restart() }

    /// Kills the simulator (its clients' connections break mid-stream, as on a network reset) and
    /// starts it again on the same port with the same certificates, record and script.
    package func restart() throws {
        TestPeers.kill(process)
        let next = Process()
        next.executableURL = process.executableURL
        next.arguments = process.arguments
        process = next
        try launch()
    }

    deinit { stop() }

    /// Kills the simulator at once and removes its files.
    package func stop() {
        TestPeers.kill(process)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Scripts the answers for device tokens: token → {"status", "reason", "timestamp", "delay_ms",
    /// "drop_once"}.
    package func script(_ answers: [String: [String: Any]]) throws {
        let data = try JSONSerialization.data(withJSONObject: answers)
        try data.write(to: URL(fileURLWithPath: controlFile))
    }

    /// Every request the simulator received, in order.
    package func records() throws -> [[String: Any]] {
        try Self.completeLines(directory + "/record.jsonl").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
    }

    /// The lines of a file the simulator appends to, without a last line it is still writing (no
    /// newline yet): a read while it writes must not see half a record.
    package static func completeLines(_ path: String) -> [Substring] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // after the last newline: empty, or a line still being written
        return lines.filter { !$0.isEmpty }
    }

    /// Tokens whose request cut the connections (`drop_once`), in order.
    package func drops() -> [String] {
        Self.completeLines(directory + "/record.jsonl.drops").map(String.init)
    }

    /// Tokens of requests with a scripted delay, as they arrived (before being answered).
    package func arrivals() -> [String] {
        Self.completeLines(directory + "/record.jsonl.arrivals").map(String.init)
    }

    package static func accepts(port: UInt16) -> Bool {
        guard let fd = connectLoopback(port: port) else { return false }
        close(fd)
        return true
    }

    package static func shell(_ script: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SimulatorError("making test certificates failed") }
    }
}

package struct SimulatorError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
