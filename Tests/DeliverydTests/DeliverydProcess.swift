import Foundation
import Glibc
import TestSupport

/// The built `deliveryd` executable, started as a child process on a free port with its own data dir.
///
/// `swift build` puts the executable beside the test bundle, so the tests run the real binary.
final class DeliverydProcess {
    let process = Process()
    let port: UInt16
    let dataDirectory: String
    private let errorPipe = Pipe()
    private let outputPipe = Pipe()
    private let keepData: Bool

    static var executableURL: URL { BuiltProduct.url("deliveryd") }

    /// Runs `deliveryd` with `arguments` and waits for it to exit; returns status, stdout and stderr.
    static func run(_ arguments: [String], environment: [String: String] = [:], directory: String? = nil) throws -> (
        Int32, String, String
    ) {
        let process = Process()
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.executableURL = executableURL
        process.arguments = arguments
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self)
        )
    }

    /// - Parameters:
    ///   - dataDirectory: default a new temporary directory.
    ///   - keepData: leave the data directory in place on `stop()`, for a second start on it.
    ///   - port: default a random one; a restart passes the previous process's port.
    init(extraArguments: [String] = [], dataDirectory: String? = nil, keepData: Bool = false, port: UInt16? = nil)
        throws
    {
        self.port = port ?? UInt16.random(in: 21_000...32_000)
        self.dataDirectory = dataDirectory ?? NSTemporaryDirectory() + "deliveryd-e2e-" + UUID().uuidString
        self.keepData = keepData
        process.executableURL = Self.executableURL
        process.arguments = ["--listen", "127.0.0.1:\(self.port)", "--data-dir", self.dataDirectory] + extraArguments
        process.environment = [:]
        process.standardError = errorPipe
        process.standardOutput = outputPipe
        try process.run()
    }

    /// Stops the process with SIGTERM and removes its data directory.
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        if !keepData { try? FileManager.default.removeItem(atPath: dataDirectory) }
        return process.terminationStatus
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would; the data stays.
    func crash() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Everything the process wrote to standard output (read after it stopped).
    func standardOutput() -> String {
        String(decoding: outputPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// The JSON log lines the process wrote to standard error (read after it stopped).
    func logLines() -> [[String: Any]] {
        standardError().split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    private var errorText: String?

    /// Everything the process wrote to standard error (read after it stopped).
    func standardError() -> String {
        if let errorText { return errorText }
        let text = String(decoding: errorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        errorText = text
        return text
    }
}
