public import FoundationEssentials
public import Storage
import Synchronization

/// The APNs environments paused because APNs refused our configuration (provider token, key, topic),
/// shared by the push workers of one process: a refusal one worker sees stops them all, instead of
/// each burning its own batches into the same failure.
///
/// It also knows which environments are *confirmed*: a push was delivered there since the process
/// started. APNs answers `BadDeviceToken` both to a dead token and to every token when the
/// environment is the wrong one for them (sandbox tokens sent to the production host), so a
/// token is removed for it only where the environment is confirmed; elsewhere the push is a dead
/// letter (replayable), and `badTokensBeforePause` of them in a row pause the environment.
public final class EnvironmentPauses: Sendable {
    private struct State {
        var schedule = PauseSchedule<PushEnvironment>()
        var confirmed: Set<PushEnvironment> = []
        /// `BadDeviceToken` answers since the last delivery, while unconfirmed.
        var unconfirmedBadTokens: [PushEnvironment: Int] = [:]
    }

    /// `BadDeviceToken` answers in an unconfirmed environment, with no delivery between them, that
    /// pause it: every token refused looks like a wrong environment or key, not like dead tokens.
    public static let badTokensBeforePause = 3

    private let state = Mutex(State())

    public init() {}

    /// When sending to `environment` resumes, if it is paused at `now`.
    public func pausedUntil(_ environment: PushEnvironment, now: Date) -> Date? {
        state.withLock { $0.schedule.pausedUntil(environment, now: now) }
    }

    /// One environment as an operator needs to see it: whether pushes go out, and if not, why and until when.
    public struct Status: Sendable, Hashable {
        public let environment: PushEnvironment
        /// When sending resumes; `nil` while sending.
        public let pausedUntil: Date?
        /// The APNs answer that paused it.
        public let reason: String?
        /// Whether a push was delivered there since the process started.
        public let confirmed: Bool
    }

    /// Both environments at `now`.
    public func statuses(now: Date) -> [Status] {
        state.withLock { state in
            PushEnvironment.allCases.map { environment in
                Status(
                    environment: environment, pausedUntil: state.schedule.pausedUntil(environment, now: now),
                    reason: state.schedule.reason(environment, now: now),
                    confirmed: state.confirmed.contains(environment))
            }
        }
    }

    /// Pauses `environment` unless a pause runs already.
    /// - Returns: when sending resumes, and the length of the pause when this call started it.
    func pause(
        _ environment: PushEnvironment, reason: String, now: Date, first: TimeInterval, maximum: TimeInterval
    ) -> (until: Date, startedLength: TimeInterval?) {
        state.withLock { state in
            state.schedule.pause(environment, reason: reason, now: now, first: first, maximum: maximum)
        }
    }

    /// A push went through: the environment is confirmed, and the next refusal starts again with
    /// the shortest pause.
    func delivered(_ environment: PushEnvironment) {
        state.withLock { state in
            state.schedule.delivered(environment)
            state.unconfirmedBadTokens[environment] = nil
            state.confirmed.insert(environment)
        }
    }

    /// Whether a push was delivered in `environment` since the process started.
    func isConfirmed(_ environment: PushEnvironment) -> Bool {
        state.withLock { $0.confirmed.contains(environment) }
    }

    /// Counts a `BadDeviceToken` in an unconfirmed environment.
    /// - Returns: whether it is the `badTokensBeforePause`-th in a row: time to pause.
    func badTokenWhileUnconfirmed(_ environment: PushEnvironment) -> Bool {
        state.withLock { state in
            let count = (state.unconfirmedBadTokens[environment] ?? 0) + 1
            state.unconfirmedBadTokens[environment] = count
            return count >= Self.badTokensBeforePause
        }
    }
}
