import Foundation
import Synchronization

/// The dashboard's answer, kept for `maximumAge` and refreshed off the request path while someone
/// is looking.
///
/// The summary (a metrics snapshot and four store queries) and a full day of history (hundreds of
/// kilobytes of numbers) cost milliseconds to build; an operator's page, or a wall screen, asks for
/// them every few seconds. A maintenance job (`refresh`) rebuilds each part every second for as
/// long as it was asked for in the last minute, so that requests find a fresh one and an idle
/// dashboard costs nothing. A request gets the newest snapshot when it is younger than
/// `maximumAge`, and builds one itself otherwise: the age is meant to be reached only after an
/// idle minute, not when the job runs late on a saturated machine (building on the request path
/// then is what made the answer slow, store reads queued behind the load), so it is set well above
/// the job's second. `generatedAt` in the answer says how old it is.
final class StatsSnapshots: Sendable {
    private struct Part {
        var bytes: [UInt8]? = nil
        var builtAt: ContinuousClock.Instant? = nil
        var askedAt: ContinuousClock.Instant? = nil
    }

    private enum Which {
        case summary
        case history
    }

    private struct State {
        var summary = Part()
        var history = Part()

        subscript(_ which: Which) -> Part {
            get { which == .summary ? summary : history }
            set { if which == .summary { summary = newValue } else { history = newValue } }
        }
    }

    let maximumAge: Duration
    /// How long after the last request the job keeps a part fresh.
    static let interest: Duration = .seconds(60)
    private let state = Mutex(State())
    private let clock = ContinuousClock()

    /// - Parameter maximumAge: how old an answer may be; zero builds every answer on its request.
    init(maximumAge: Duration) {
        self.maximumAge = maximumAge
    }

    /// The summary's bytes (a JSON object), from the snapshot or built now.
    func summary(build: () throws -> [UInt8]) rethrows -> [UInt8] {
        try part(.summary, build: build)
    }

    /// The whole history's bytes, from the snapshot or built now.
    func history(build: () throws -> [UInt8]) rethrows -> [UInt8] {
        try part(.history, build: build)
    }

    /// The summary's snapshot when it is young enough, never built here (an answer from memory).
    func cachedSummary() -> [UInt8]? { cached(.summary) }

    /// The history's snapshot when it is young enough, never built here.
    func cachedHistory() -> [UInt8]? { cached(.history) }

    /// Rebuilds the parts asked for within the last minute (the maintenance job, every second).
    func refresh(summary buildSummary: () throws -> [UInt8], history buildHistory: () -> [UInt8]) rethrows {
        guard maximumAge > .zero else { return }
        let now = clock.now
        let (wantsSummary, wantsHistory) = state.withLock { state in
            (Self.isWanted(state.summary, now: now), Self.isWanted(state.history, now: now))
        }
        if wantsSummary { store(try buildSummary(), in: .summary) }
        if wantsHistory { store(buildHistory(), in: .history) }
    }

    private static func isWanted(_ part: Part, now: ContinuousClock.Instant) -> Bool {
        guard let askedAt = part.askedAt else { return false }
        return now - askedAt < interest
    }

    private func part(_ key: Which, build: () throws -> [UInt8]) rethrows -> [UInt8] {
        if let fresh = cached(key) { return fresh }
        let bytes = try build()
        if maximumAge > .zero { store(bytes, in: key) }
        return bytes
    }

    /// The part's bytes when younger than `maximumAge`; counts as asked for either way.
    private func cached(_ key: Which) -> [UInt8]? {
        let now = clock.now
        return state.withLock { state -> [UInt8]? in
            state[key].askedAt = now
            guard maximumAge > .zero, let bytes = state[key].bytes, let builtAt = state[key].builtAt,
                now - builtAt <= maximumAge
            else { return nil }
            return bytes
        }
    }

    private func store(_ bytes: [UInt8], in key: Which) {
        let now = clock.now
        state.withLock { state in
            state[key].bytes = bytes
            state[key].builtAt = now
        }
    }
}
