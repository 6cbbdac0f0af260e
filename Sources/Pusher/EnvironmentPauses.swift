import FoundationEssentials
internal import Storage
import Synchronization

/// The APNs environments paused because APNs refused our configuration (provider token, key, topic),
/// shared by the push workers of one process: a refusal one worker sees stops them all, instead of
/// each burning its own batches into the same failure.
public final class EnvironmentPauses: Sendable {
    private struct State {
        var until: [PushEnvironment: Date] = [:]
        /// The next pause's length: doubles while APNs keeps refusing, reset by a delivered push.
        var nextLength: [PushEnvironment: TimeInterval] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// When sending to `environment` resumes, if it is paused at `now`.
    func pausedUntil(_ environment: PushEnvironment, now: Date) -> Date? {
        state.withLock { state in state.until[environment].flatMap { $0 > now ? $0 : nil } }
    }

    /// Pauses `environment` unless a pause runs already.
    /// - Returns: when sending resumes, and the length of the pause when this call started it.
    func pause(_ environment: PushEnvironment, now: Date, first: TimeInterval, maximum: TimeInterval) -> (
        until: Date, startedLength: TimeInterval?
    ) {
        state.withLock { state in
            if let until = state.until[environment], until > now { return (until, nil) }
            let length = state.nextLength[environment] ?? first
            state.nextLength[environment] = min(length * 2, maximum)
            let until = now.addingTimeInterval(length)
            state.until[environment] = until
            return (until, length)
        }
    }

    /// A push went through: the next refusal starts again with the shortest pause.
    func delivered(_ environment: PushEnvironment) {
        state.withLock { state in _ = state.nextLength.removeValue(forKey: environment) }
    }
}
