public import Foundation
import Synchronization

/// Sends a batch of FCM messages and answers for each, in order. The worker's thread owns its sender.
public protocol FCMSender {
    func send(_ requests: [FCMRequest]) -> [FCMResponse]
}

extension FCMClient: FCMSender {
    public func send(_ requests: [FCMRequest]) -> [FCMResponse] { send(requests, now: Date()) }
}

/// What a push worker needs to reach Android devices: the FCM API's address, a sender, and the
/// service account's access tokens (shared by the workers of one process).
///
/// - Important: Not `Sendable`: it holds its worker's sender.
public struct FCMRoute {
    /// `https://fcm.googleapis.com`, or a setting's.
    public let baseURL: String
    public let sender: any FCMSender
    public let tokens: FCMAccessTokens

    public init(baseURL: String, sender: any FCMSender, tokens: FCMAccessTokens) {
        self.baseURL = baseURL
        self.sender = sender
        self.tokens = tokens
    }
}

/// The Firebase projects paused because FCM refused our credentials or sender, shared by the push
/// workers of one process, like `EnvironmentPauses` for APNs: the rows wait instead of burning into
/// the same failure, and the pause doubles while FCM keeps refusing.
public final class FCMProjectPauses: Sendable {
    private let schedule = Mutex(PauseSchedule<String>())

    public init() {}

    /// When sending for `project` resumes, if it is paused at `now`.
    public func pausedUntil(_ project: String, now: Date) -> Date? {
        schedule.withLock { $0.pausedUntil(project, now: now) }
    }

    /// The running pauses at `now`, by project, with the FCM answer that started each.
    public func paused(now: Date) -> [(project: String, until: Date, reason: String)] {
        schedule.withLock { schedule in
            schedule.paused(now: now).sorted().compactMap { project in
                guard let until = schedule.pausedUntil(project, now: now) else { return nil }
                return (project, until, schedule.reason(project, now: now) ?? "")
            }
        }
    }

    /// Pauses `project` unless a pause runs already.
    /// - Returns: when sending resumes, and the length of the pause when this call started it.
    func pause(_ project: String, reason: String, now: Date, first: TimeInterval, maximum: TimeInterval) -> (
        until: Date, startedLength: TimeInterval?
    ) {
        schedule.withLock { $0.pause(project, reason: reason, now: now, first: first, maximum: maximum) }
    }

    /// A message went through: the next refusal starts again with the shortest pause.
    func delivered(_ project: String) {
        schedule.withLock { $0.delivered(project) }
    }
}
