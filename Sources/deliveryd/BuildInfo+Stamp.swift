import CBuildStamp
import Telemetry

extension BuildInfo {
    /// The release version; the Debian package takes its version from `deliveryd --version`.
    static let releaseVersion = "0.9.0"

    /// This binary: the release version, and the commit and day that `make build` stamped into it.
    static let current = BuildInfo(
        version: releaseVersion,
        commit: deliveryd_stamped_commit().map { String(cString: $0) } ?? "unknown",
        date: deliveryd_stamped_date().map { String(cString: $0) } ?? "unknown")
}
