import Foundation
import TestSupport
import Testing

/// schemathesis (from the test virtualenv) generates requests from `docs/openapi.yaml` for every
/// operation, valid and invalid, and sends them to the real binary: none may answer 5xx.
@Suite("docs/openapi.yaml, fuzzed by schemathesis", .serialized)
struct SchemathesisTests {
    static let adminKey = "schemathesis-admin-key-0123456789"

    /// A bounded run with a fixed seed, so that every run sends the same cases.
    @Test func noGeneratedRequestIsAServerError() throws {
        // The fuzzer sends many wrong credentials on purpose; the limits would turn it away.
        let server = try DeliverydProcess(extraArguments: [
            "--admin-key", Self.adminKey, "--access-log", "off", "--auth-failures-per-address", "100000",
            "--auth-failures-per-key", "100000",
        ])
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let tool = APNsSimulator.repositoryRoot.appendingPathComponent(".venv/bin/schemathesis").path
        try #require(FileManager.default.isExecutableFile(atPath: tool), "run `make test`: it installs schemathesis")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [
            "run", OpenAPIOperations.documentURL.path, "--url", "http://127.0.0.1:\(server.port)",
            "-H", "Authorization: Bearer \(Self.adminKey)", "--checks", "not_a_server_error", "--max-examples", "15",
            "--seed", "20261203", "--no-color",
        ]
        process.environment = ["HOME": NSTemporaryDirectory(), "SCHEMATHESIS_HOOKS": ""]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let summary = text.split(separator: "\n").filter { $0.contains("generated") || $0.contains("Tested:") }
        print("schemathesis: \(summary.joined(separator: "; "))")
        #expect(process.terminationStatus == 0, "schemathesis found failures:\n\(text.suffix(4000))")
        let operations = try OpenAPIOperations.all().count
        #expect(text.contains("Tested: \(operations)"), "not every operation was tested:\n\(text.suffix(2000))")
        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/healthz").status == 200)
    }
}
