/// Which build a process is, for `deliveryd --version`, `deliveryd_build_info`, the log and the
/// dashboard: what a support ticket quotes.
public struct BuildInfo: Sendable, Equatable {
    public let version: String
    /// `git describe --always --dirty` of the checkout built, or `unknown` (a build nobody stamped).
    public let commit: String
    /// The day of the build (YYYY-MM-DD, UTC), or `unknown`.
    public let date: String

    public init(version: String, commit: String = "unknown", date: String = "unknown") {
        self.version = version
        self.commit = commit
        self.date = date
    }

    /// `0.9.0 (commit e495ced, built 2026-12-06)`.
    public var description: String { "\(version) (commit \(commit), built \(date))" }
}
