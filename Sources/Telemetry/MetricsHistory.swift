public import FoundationEssentials
import JSONSyntax
import Synchronization

/// Named figures sampled at a fixed step and kept in memory for a bounded time, so that a dashboard
/// that is reloaded, or opened by a second operator, draws the same curves as the one left open.
///
/// Two tiers: every sample for the recent window, every `coarseEvery`-th for the long one. Counters
/// are kept cumulative (a reader takes the difference of any two samples: a rate over any window,
/// a quantile from histogram buckets), gauges as read. Memory is bounded by the tiers' capacities
/// and `maximumColumns`: at most `(fine + coarse capacity) × maximumColumns` numbers.
public final class MetricsHistory: Sendable {
    /// How one tier keeps its samples.
    public struct Tier: Sendable, Hashable {
        public let name: String
        /// Seconds between two kept samples.
        public let step: TimeInterval
        public let capacity: Int
    }

    /// A new name beyond this many is not kept: label values come from fixed sets and APNs reasons,
    /// so reaching it means something unexpected, not a need for more.
    public static let maximumColumns = 64

    public let fine: Tier
    public let coarse: Tier
    /// Names whose values are read as they are (the rest are cumulative counters).
    public let gauges: Set<String>

    private struct Ring {
        let capacity: Int
        /// Unix milliseconds of each kept sample, oldest first once `start` is applied.
        var times: [Int64] = []
        /// One row per sample, aligned with `State.columns`; a row is shorter when a column
        /// appeared after it was taken (its missing values read as 0: nothing counted yet).
        var rows: [[Double]] = []
        var start = 0

        init(capacity: Int) { self.capacity = capacity }

        mutating func append(_ time: Int64, _ row: [Double]) {
            if times.count < capacity {
                times.append(time)
                rows.append(row)
            } else {
                times[start] = time
                rows[start] = row
                start = (start + 1) % capacity
            }
        }

        /// Sample indexes in time order.
        var order: [Int] { (0..<times.count).map { (start + $0) % times.count } }
    }

    private struct State {
        var columns: [String] = []
        var columnIndex: [String: Int] = [:]
        var fine: Ring
        var coarse: Ring
        var samplesTaken = 0
        /// The whole history as JSON, kept until the next sample: every reload reads it.
        var encodedAll: [UInt8]?
    }

    private let state: Mutex<State>

    /// - Parameters:
    ///   - step: seconds between samples (the fine tier's step).
    ///   - fineCapacity: samples of the fine tier (default 360: an hour at 10 s).
    ///   - coarseEvery: every how many samples the coarse tier keeps one (default 6: a minute at 10 s).
    ///   - coarseCapacity: samples of the coarse tier (default 1440: a day at a minute).
    public init(
        step: TimeInterval, fineCapacity: Int = 360, coarseEvery: Int = 6, coarseCapacity: Int = 1440,
        gauges: Set<String>
    ) {
        precondition(step > 0 && fineCapacity > 0 && coarseEvery > 0 && coarseCapacity > 0)
        fine = Tier(name: "fine", step: step, capacity: fineCapacity)
        coarse = Tier(name: "coarse", step: step * Double(coarseEvery), capacity: coarseCapacity)
        self.gauges = gauges
        state = Mutex(State(fine: Ring(capacity: fineCapacity), coarse: Ring(capacity: coarseCapacity)))
    }

    /// Keeps one sample taken at `time`.
    public func record(_ values: [(name: String, value: Double)], at time: Date) {
        let milliseconds = Int64((time.timeIntervalSince1970 * 1000).rounded())
        let coarseEvery = max(1, Int((coarse.step / fine.step).rounded()))
        state.withLock { state in
            var row = [Double](repeating: 0, count: state.columns.count)
            for (name, value) in values {
                var index = state.columnIndex[name]
                if index == nil, state.columns.count < Self.maximumColumns {
                    index = state.columns.count
                    state.columnIndex[name] = state.columns.count
                    state.columns.append(name)
                    row.append(0)
                }
                if let index { row[index] = value.isFinite ? value : 0 }
            }
            state.fine.append(milliseconds, row)
            if state.samplesTaken % coarseEvery == 0 { state.coarse.append(milliseconds, row) }
            state.samplesTaken += 1
            state.encodedAll = nil
        }
    }

    /// How many samples each tier holds now.
    public var counts: (fine: Int, coarse: Int) {
        state.withLock { ($0.fine.times.count, $0.coarse.times.count) }
    }

    /// The history as a JSON object: `{"gauges": [...], "tiers": [{"name", "stepSeconds", "capacity",
    /// "timesMs": [...], "series": {name: [...]}}]}`; with `sinceMilliseconds` (Unix milliseconds, as
    /// a client sends it, any value), only samples taken after it.
    public func json(sinceMilliseconds: Int64? = nil) -> [UInt8] {
        state.withLock { state in
            encode(&state, since: sinceMilliseconds)
        }
    }

    /// `json(sinceMilliseconds:)` when it holds at most `limit` samples of each tier, as a
    /// dashboard's periodic poll asks, else `nil`: small enough to encode on an event loop.
    public func recentJSON(sinceMilliseconds: Int64, limit: Int) -> [UInt8]? {
        state.withLock { state in
            func newer(_ ring: Ring) -> Int { ring.times.reduce(0) { $0 + ($1 > sinceMilliseconds ? 1 : 0) } }
            guard newer(state.fine) <= limit, newer(state.coarse) <= limit else { return nil }
            return encode(&state, since: sinceMilliseconds)
        }
    }

    private func encode(_ state: inout State, since sinceMilliseconds: Int64?) -> [UInt8] {
        if sinceMilliseconds == nil, let cached = state.encodedAll { return cached }
        var out: [UInt8] = []
        out.reserveCapacity(sinceMilliseconds == nil ? 64 * 1024 : 1024)
        out.append(contentsOf: #"{"gauges":["#.utf8)
        for (position, name) in state.columns.filter(gauges.contains).enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(name, to: &out)
        }
        out.append(contentsOf: #"],"tiers":["#.utf8)
        Self.appendTier(fine, state.fine, columns: state.columns, since: sinceMilliseconds, to: &out)
        out.append(UInt8(ascii: ","))
        Self.appendTier(coarse, state.coarse, columns: state.columns, since: sinceMilliseconds, to: &out)
        out.append(contentsOf: "]}".utf8)
        if sinceMilliseconds == nil { state.encodedAll = out }
        return out
    }

    private static func appendTier(
        _ tier: Tier, _ ring: Ring, columns: [String], since: Int64?, to out: inout [UInt8]
    ) {
        let order = ring.order.filter { index in since.map { ring.times[index] > $0 } ?? true }
        out.append(contentsOf: #"{"name":"#.utf8)
        JSONText.appendQuoted(tier.name, to: &out)
        out.append(contentsOf: #","stepSeconds":"#.utf8)
        appendNumber(tier.step, to: &out)
        out.append(contentsOf: #","capacity":"#.utf8)
        out.append(contentsOf: String(tier.capacity).utf8)
        out.append(contentsOf: #","timesMs":["#.utf8)
        for (position, index) in order.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: String(ring.times[index]).utf8)
        }
        out.append(contentsOf: #"],"series":{"#.utf8)
        for (column, name) in columns.enumerated() {
            if column > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(name, to: &out)
            out.append(contentsOf: ":[".utf8)
            for (position, index) in order.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                let row = ring.rows[index]
                appendNumber(column < row.count ? row[column] : 0, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(contentsOf: "}}".utf8)
    }

    /// Whole numbers without a fraction; others to a millionth (latencies and ages in seconds).
    /// Not-a-number and infinities, which JSON cannot carry, are written as 0.
    private static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        if !value.isFinite {
            out.append(UInt8(ascii: "0"))
        } else if value.rounded() == value, abs(value) < 1e15 {
            out.append(contentsOf: String(Int64(value)).utf8)
        } else {
            out.append(contentsOf: "\((value * 1e6).rounded() / 1e6)".utf8)
        }
    }
}
