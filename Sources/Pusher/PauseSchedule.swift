import FoundationEssentials

/// Pauses of sending to a destination (an APNs environment, a Firebase project) that refused our
/// credentials: each pause doubles while the refusals go on, up to a ceiling, and a delivery starts
/// the next one short again. A value: its owner keeps it under its lock.
struct PauseSchedule<Destination: Hashable>: Sendable where Destination: Sendable {
    private var until: [Destination: Date] = [:]
    private var reasons: [Destination: String] = [:]
    private var nextLength: [Destination: TimeInterval] = [:]

    /// When sending to `destination` resumes, if it is paused at `now`.
    func pausedUntil(_ destination: Destination, now: Date) -> Date? {
        until[destination].flatMap { $0 > now ? $0 : nil }
    }

    /// The answer that started the pause running at `now`, if one runs.
    func reason(_ destination: Destination, now: Date) -> String? {
        pausedUntil(destination, now: now) == nil ? nil : reasons[destination]
    }

    /// The destinations paused at `now`.
    func paused(now: Date) -> [Destination] {
        until.filter { $0.value > now }.map(\.key)
    }

    /// Pauses `destination` unless a pause runs already.
    /// - Returns: when sending resumes, and the length of the pause when this call started it.
    mutating func pause(
        _ destination: Destination, reason: String, now: Date, first: TimeInterval, maximum: TimeInterval
    ) -> (until: Date, startedLength: TimeInterval?) {
        if let running = pausedUntil(destination, now: now) { return (running, nil) }
        let length = nextLength[destination] ?? first
        nextLength[destination] = min(length * 2, maximum)
        let resume = now.addingTimeInterval(length)
        until[destination] = resume
        reasons[destination] = reason
        return (resume, length)
    }

    /// A push went through: the next refusal starts again with the shortest pause.
    mutating func delivered(_ destination: Destination) {
        nextLength[destination] = nil
    }
}
