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
    /// The Firebase project the service account sends for: the only one Android devices register with.
    public var projectID: String { tokens.account.projectID }

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
    private struct Pause {
        var until: Date
        var reason: String
    }

    private struct State {
        var pauses: [String: Pause] = [:]
        var nextLength: [String: TimeInterval] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// When sending for `project` resumes, if it is paused at `now`.
    public func pausedUntil(_ project: String, now: Date) -> Date? {
        state.withLock { state in state.pauses[project].flatMap { $0.until > now ? $0.until : nil } }
    }

    /// The running pauses at `now`, by project, with the FCM answer that started each.
    public func paused(now: Date) -> [(project: String, until: Date, reason: String)] {
        state.withLock { state in
            state.pauses.filter { $0.value.until > now }.map { ($0.key, $0.value.until, $0.value.reason) }
                .sorted { $0.project < $1.project }
        }
    }

    /// Pauses `project` unless a pause runs already.
    /// - Returns: when sending resumes, and the length of the pause when this call started it.
    func pause(_ project: String, reason: String, now: Date, first: TimeInterval, maximum: TimeInterval) -> (
        until: Date, startedLength: TimeInterval?
    ) {
        state.withLock { state in
            if let running = state.pauses[project], running.until > now { return (running.until, nil) }
            let length = state.nextLength[project] ?? first
            state.nextLength[project] = min(length * 2, maximum)
            let until = now.addingTimeInterval(length)
            state.pauses[project] = Pause(until: until, reason: reason)
            return (until, length)
        }
    }

    /// A message went through: the next refusal starts again with the shortest pause.
    func delivered(_ project: String) {
        state.withLock { state in
            if state.nextLength[project] != nil { state.nextLength[project] = nil }
        }
    }
}
