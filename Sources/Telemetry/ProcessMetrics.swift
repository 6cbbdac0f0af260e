public import Foundation

/// The process's own figures, read from `/proc` when the registry is read.
public enum ProcessMetrics {
    /// Declares resident memory, open file descriptors, uptime and build info in `registry`.
    /// - Parameter build: the labels of `deliveryd_build_info`.
    public static func register(in registry: MetricsRegistry, build: BuildInfo, startedAt: Date = Date()) {
        let resident = registry.gauge(
            "deliveryd_process_resident_memory_bytes", help: "Resident memory of the process.")
        let descriptors = registry.gauge("deliveryd_process_open_fds", help: "Open file descriptors.")
        let uptime = registry.gauge("deliveryd_process_uptime_seconds", help: "Seconds since the process started.")
        let buildInfo = registry.gauge(
            "deliveryd_build_info", help: "Always 1; the labels name the build.",
            labels: ["version", "commit", "built", "swift"])
        buildInfo.set(1, [build.version, build.commit, build.date, swiftVersion])
        let droppedLogLines = registry.counter(
            "deliveryd_log_lines_dropped_total",
            help: "Log lines (access log included) dropped because the log output did not keep up.")
        registry.addCollector {
            droppedLogLines.setAll([([], Double(LogOutput.standardError.droppedLines))])
            resident.set(Double(residentBytes() ?? 0))
            descriptors.set(Double(openFileDescriptors() ?? 0))
            uptime.set(Date().timeIntervalSince(startedAt).rounded())
        }
    }

    /// Resident set size from `/proc/self/statm` (pages × page size).
    public static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    public static func openFileDescriptors() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map(\.count)
    }

    static var swiftVersion: String {
        #if compiler(>=6.2)
            "6.2"
        #elseif compiler(>=6.1)
            "6.1"
        #else
            "6.0"
        #endif
    }
}
