import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// The built `deliveryd` executable, started as a child process on a free port with its own data dir.
///
/// `swift build` puts the executable beside the test bundle, so the tests run the real binary.
final class DeliverydProcess {
    /// For tests whose few keys and tokens stand for a crowd of merchants, riders and customers: the
    /// per-credential request limits, which share one machine between tenants, lifted.
    static let crowdArguments = ["--requests-per-key", "1000000", "--requests-per-app", "1000000"]

    let process = Process()
    let port: UInt16
    let dataDirectory: String
    private let errorPipe = Pipe()
    private let outputPipe = Pipe()
    /// The pipes are read as the process writes, not only after it stopped: a process whose logs
    /// filled a pipe's 64 KiB would block on its next write and never stop.
    private let errors: PipeDrain
    private let output: PipeDrain
    private let keepData: Bool
    private let usesLauncher: Bool

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
    ///   - clockShift: seconds that the process's wall clock runs ahead, through libfaketime (from
    ///     `make test`'s packages); its monotonic clock, which timers use, stays real.
    ///   - openFileLimit: the process's soft and hard open-file limit, set by `prlimit` (which then
    ///     becomes deliveryd itself).
    ///   - environment: variables the process starts with (default none).
    init(
        extraArguments: [String] = [], dataDirectory: String? = nil, keepData: Bool = false, port: UInt16? = nil,
        clockShift: Int? = nil, openFileLimit: Int? = nil, environment: [String: String] = [:]
    ) throws {
        self.port = port ?? Self.unusedPort()
        self.dataDirectory = dataDirectory ?? NSTemporaryDirectory() + "deliveryd-e2e-" + UUID().uuidString
        self.keepData = keepData
        self.usesLauncher = clockShift != nil
        let arguments = ["--listen", "127.0.0.1:\(self.port)", "--data-dir", self.dataDirectory] + extraArguments
        if let clockShift {
            // The faketime launcher rather than LD_PRELOAD set here: a Swift program started directly
            // with the library preloaded sees no command-line arguments.
            let launcher = "/usr/bin/faketime"
            guard FileManager.default.isExecutableFile(atPath: launcher) else {
                throw AppError(description: "faketime is missing: `make test` installs Debian's faketime package")
            }
            process.executableURL = URL(fileURLWithPath: launcher)
            process.arguments = ["-f", "+\(clockShift)s", Self.executableURL.path] + arguments
            process.environment = environment.merging(["FAKETIME_DONT_FAKE_MONOTONIC": "1"]) { $1 }
        } else if let openFileLimit {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            process.arguments =
                ["--nofile=\(openFileLimit):\(openFileLimit)", "--", Self.executableURL.path] + arguments
            process.environment = environment
        } else {
            process.executableURL = Self.executableURL
            process.arguments = arguments
            process.environment = environment
        }
        process.standardError = errorPipe
        process.standardOutput = outputPipe
        try process.run()
        errors = PipeDrain(errorPipe)
        output = PipeDrain(outputPipe)
    }

    /// A port below Linux's ephemeral range (32768 up) that nothing holds now. Other suites start
    /// servers on random ports beside this one, and deliveryd exits when its port is taken: a port
    /// picked without looking was, once in a while, another server's, and the test waited for a
    /// health check that never came.
    static func unusedPort() -> UInt16 {
        var candidate = UInt16.random(in: 21_000...32_000)
        for _ in 0..<100 {
            let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = candidate.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(probe)
            if bound == 0 { return candidate }
            candidate = UInt16.random(in: 21_000...32_000)
        }
        return candidate
    }

    /// Stops the process with SIGTERM and removes its data directory. A process still running a
    /// minute later (far past its own shutdown deadline) is a failure of the test, and is killed
    /// rather than waited for.
    func stop() -> Int32 {
        if process.isRunning { kill(deliverydPID, SIGTERM) }
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(deliverydPID, SIGKILL)
            process.waitUntilExit()
            let lastLines = standardError().split(separator: "\n").suffix(20).joined(separator: "\n")
            Issue.record(
                "deliveryd did not stop within 60 s of SIGTERM and was killed; its last log lines:\n\(lastLines)")
        }
        process.waitUntilExit()
        if !keepData { try? FileManager.default.removeItem(atPath: dataDirectory) }
        return process.terminationStatus
    }

    /// The pid of deliveryd itself: the launcher's child when the clock is shifted (the faketime
    /// launcher blocks the signals it is sent instead of passing them on).
    private var deliverydPID: pid_t {
        guard usesLauncher else { return process.processIdentifier }
        let pid = process.processIdentifier
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return children.split(separator: " ").first.flatMap { pid_t($0) } ?? pid
    }

    /// Waits until the process answers `GET /healthz` (`timeout` is a ceiling for one that never
    /// comes up, not a measure). One that exits first fails at once; either failure says the
    /// process's last log lines, so that a start that did not happen says why.
    func waitUntilHealthy(timeout: Double = 120) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let response = try? LoopbackHTTP.send(port: port, "GET", "/healthz"), response.status == 200 { return }
            if !process.isRunning {
                throw LoopbackHTTP.Failure(
                    description:
                        "deliveryd exited (status \(process.terminationStatus)) before it became healthy on port \(port); its last log lines:\n\(lastLogLines())"
                )
            }
            usleep(50_000)
        }
        throw LoopbackHTTP.Failure(
            description:
                "deliveryd did not become healthy on port \(port) within \(Int(timeout)) s; its last log lines:\n\(lastLogLines())"
        )
    }

    private func lastLogLines() -> String {
        errors.textSoFar().split(separator: "\n").suffix(20).joined(separator: "\n")
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would; the data stays.
    func crash() {
        kill(deliverydPID, SIGKILL)
        process.waitUntilExit()
    }

    /// Everything the process wrote to standard output (read after it stopped).
    func standardOutput() -> String {
        output.text()
    }

    /// The JSON log lines the process wrote to standard error (read after it stopped).
    func logLines() -> [[String: Any]] {
        standardError().split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// Everything the process wrote to standard error (read after it stopped).
    func standardError() -> String {
        errors.text()
    }
}

/// Reads a pipe to its end on a thread of its own, keeping what it read.
final class PipeDrain: Sendable {
    private let collected = Mutex<[UInt8]>([])
    private let ended = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let descriptor = pipe.fileHandleForReading.fileDescriptor
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                collected.withLock { $0 += buffer[0..<count] }
            }
            ended.signal()
        }
    }

    /// What the pipe carried so far, the process running or not.
    func textSoFar() -> String {
        String(decoding: collected.withLock { $0 }, as: UTF8.self)
    }

    /// Everything the pipe carried, once every writer closed it (the process stopped).
    func text() -> String {
        ended.wait()
        ended.signal()
        return String(decoding: collected.withLock { $0 }, as: UTF8.self)
    }
}
