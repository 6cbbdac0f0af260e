public import FoundationEssentials
public import Storage

/// How this process's pushes leave it, as an operator needs to see it during a bad minute: to APNs
/// (with each environment sending or paused, and why) or to the log sender, which delivers nothing;
/// and Android devices' to FCM, when a service account is configured.
///
/// The executable builds it from the pusher's state; the API only shows it.
public struct PushSendingStatus: Sendable, Hashable {
    public enum Sender: String, Sendable, Hashable {
        case apns
        /// No APNs key configured: pushes are written to the push log and reach no phone.
        case log
    }

    public struct Environment: Sendable, Hashable {
        public let environment: PushEnvironment
        /// When sending resumes; `nil` while sending.
        public let pausedUntil: Date?
        /// The APNs answer that paused it.
        public let reason: String?
        /// Whether a push was delivered there since the process started.
        public let confirmed: Bool

        public init(environment: PushEnvironment, pausedUntil: Date?, reason: String?, confirmed: Bool) {
            self.environment = environment
            self.pausedUntil = pausedUntil
            self.reason = reason
            self.confirmed = confirmed
        }
    }

    /// The Firebase project Android messages go to, sending or paused.
    public struct Android: Sendable, Hashable {
        public let project: String
        /// When sending resumes; `nil` while sending.
        public let pausedUntil: Date?
        /// The FCM answer that paused it.
        public let reason: String?

        public init(project: String, pausedUntil: Date?, reason: String?) {
            self.project = project
            self.pausedUntil = pausedUntil
            self.reason = reason
        }
    }

    public let sender: Sender
    /// The apps (bundle ids) deliveryd has APNs keys for.
    public let apps: [String]
    public let environments: [Environment]
    /// `nil` without FCM: Android devices are not accepted.
    public let android: Android?

    public init(sender: Sender, apps: [String], environments: [Environment], android: Android? = nil) {
        self.android = android
        self.sender = sender
        self.apps = apps
        self.environments = environments
    }

    /// A service without a pusher, or with the log sender.
    public static let logSender = PushSendingStatus(sender: .log, apps: [], environments: [])
}
