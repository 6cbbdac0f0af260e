public import FoundationEssentials

/// When a failed delivery is tried again: after each delay in turn, each moved by up to a tenth either
/// way so that the retries of many deliveries failed together do not arrive together; after the last,
/// the delivery has failed. The default spreads eleven attempts over about three days.
public struct WebhookRetrySchedule: Sendable, Hashable {
    public var delays: [TimeInterval]

    /// 5 s, 1 min, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 20 h: 71.6 hours in all.
    public static let standard = WebhookRetrySchedule(
        delays: [5, 60, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 72_000])

    public init(delays: [TimeInterval]) { self.delays = delays }

    /// The whole retry period.
    public var period: TimeInterval { delays.reduce(0, +) }

    /// The time of the next attempt after `attempts` failed ones, `nil` when none is left.
    /// - Parameter jitter: a number in -1...1 (random in service; fixed in tests).
    public func nextAttempt(afterFailed attempts: Int, now: Date, jitter: Double) -> Date? {
        guard attempts >= 1, attempts <= delays.count else { return nil }
        let delay = delays[attempts - 1]
        return now.addingTimeInterval(delay + delay * 0.1 * max(-1, min(1, jitter)))
    }
}
