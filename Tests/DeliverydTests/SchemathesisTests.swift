import Foundation
import TestScheduling
import TestSupport
import Testing

/// schemathesis (from the test virtualenv) generates requests from `docs/openapi.yaml` for every
/// operation, valid and invalid, and sends them to the real binary, with every check schemathesis has:
/// no 5xx; every request the document calls valid accepted (or refused only for who asks or what
/// exists: 401, 403, 404, 409, 429) and every invalid one refused, so that the document is no looser
/// and no stricter than the server; answers conform to the documented statuses, types and schemas.
///
/// A schema cannot depend on the credential, and some fields do (an admin names the merchant of an
/// order, a merchant key may not): the merchant's routes are fuzzed with a merchant key, the admin's
/// with the admin key. The two rules that depend on the moment of sending (the ETA window, one
/// `Idempotency-Key` per request) are applied by `Tests/schemathesis/hooks.py`.
@Suite("docs/openapi.yaml, fuzzed by schemathesis", .serialized, .heavy)
struct SchemathesisTests {
    static let adminKey = "schemathesis-admin-key-0123456789"

    /// Bounded runs with a fixed seed, so that every run sends the same cases.
    @Test func everyGeneratedRequestIsAnsweredAsTheDocumentSays() throws {
        // The fuzzer sends many wrong credentials and many requests with one key on purpose: the limits
        // would turn most of it away (429 is documented on every operation; OpenAPITests checks it).
        let server = try DeliverydProcess(
            extraArguments: [
                "--admin-key", Self.adminKey, "--access-log", "off", "--auth-failures-per-address", "100000",
                "--auth-failures-per-key", "100000",
            ] + DeliverydProcess.crowdArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let created = try LoopbackHTTP.send(
            port: server.port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
            json: ["role": "merchant", "merchantId": "m-schemathesis"])
        let merchantKey = try #require(created.json["key"] as? String, "no merchant key: \(created.status)")

        let merchantRun = try Self.schemathesis(
            port: server.port, bearer: merchantKey, paths: ["--exclude-path-regex", "^/v1/admin"])
        let adminRun = try Self.schemathesis(
            port: server.port, bearer: Self.adminKey, paths: ["--include-path-regex", "^/v1/admin"])
        for run in [merchantRun, adminRun] {
            print("schemathesis (\(run.name)): \(run.summary)")
            #expect(run.status == 0, "schemathesis found failures (\(run.name)):\n\(run.output.suffix(6000))")
        }
        let operations = try OpenAPIOperations.all()
        let adminOperations = operations.filter { $0.split(separator: " ")[1].hasPrefix("/v1/admin") }.count
        #expect(merchantRun.output.contains("Tested: \(operations.count - adminOperations)"), "\(merchantRun.summary)")
        #expect(adminRun.output.contains("Tested: \(adminOperations)"), "\(adminRun.summary)")
        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/healthz").status == 200)
    }

    private struct Run {
        let name: String
        let status: Int32
        let output: String
        var summary: String {
            output.split(separator: "\n").filter { $0.contains("generated") || $0.contains("Tested:") }
                .joined(separator: "; ")
        }
    }

    private static func schemathesis(port: UInt16, bearer: String, paths: [String]) throws -> Run {
        let root = APNsSimulator.repositoryRoot
        let tool = root.appendingPathComponent(".venv/bin/schemathesis").path
        try #require(FileManager.default.isExecutableFile(atPath: tool), "run `make test`: it installs schemathesis")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments =
            [
                "run", OpenAPIOperations.documentURL.path, "--url", "http://127.0.0.1:\(port)",
                "-H", "Authorization: Bearer \(bearer)", "--checks", "all",
                // With the credential given by `-H`, a case "without" Authorization still carries it.
                "--exclude-checks", "missing_required_header",
                "--max-examples", "15", "--seed", "20261203", "--no-color",
            ] + paths
        // Its cache (stored failures, replayed first) goes to a fresh directory: every run the same cases,
        // and nothing written into the repository.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("schemathesis-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.currentDirectoryURL = scratch
        process.environment = [
            "HOME": NSTemporaryDirectory(),
            "SCHEMATHESIS_HOOKS": root.appendingPathComponent("Tests/schemathesis/hooks.py").path,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return Run(name: paths.joined(separator: " "), status: process.terminationStatus, output: text)
    }
}
