import Synchronization

/// Every metric of the process, behind one lock, rendered as Prometheus text or as JSON values.
///
/// Families are declared once (name, help, kind, label names) and handed out as small `Sendable`
/// handles (`Counter`, `Gauge`, `Histogram`) that the modules keep. Label values must come from
/// bounded sets (routes, statuses, reasons), never from ids or tokens; past `maximumSeries` label
/// sets a family folds new ones into `{…="other"}` so a bug cannot eat the memory.
public final class MetricsRegistry: Sendable {
    public enum Kind: String, Sendable {
        case counter
        case gauge
        case histogram
    }

    /// One labelled series: a value, or a histogram's buckets, sum and count.
    public struct Series: Sendable, Hashable {
        public var labels: [String]
        public var value: Double = 0
        /// Cumulative counts per upper bound of `Family.buckets` (histograms only).
        public var bucketCounts: [UInt64] = []
        public var sum: Double = 0
        public var count: UInt64 = 0
    }

    /// A family as the registry holds it; `series` are in the order they first appeared.
    public struct Family: Sendable {
        public let name: String
        public let help: String
        public let kind: Kind
        public let labelNames: [String]
        public let buckets: [Double]
        public fileprivate(set) var series: [Series] = []
        fileprivate var index: [[String]: Int] = [:]
    }

    public static let maximumSeries = 500

    private struct State {
        var families: [Family] = []
        var byName: [String: Int] = [:]
        var collectors: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        Counter(family: declare(name, help: help, kind: .counter, labels: labels, buckets: []), registry: self)
    }

    public func gauge(_ name: String, help: String, labels: [String] = []) -> Gauge {
        Gauge(family: declare(name, help: help, kind: .gauge, labels: labels, buckets: []), registry: self)
    }

    /// - Parameter buckets: upper bounds in ascending order; `+Inf` is added.
    public func histogram(_ name: String, help: String, labels: [String] = [], buckets: [Double]) -> Histogram {
        precondition(buckets == buckets.sorted() && !buckets.isEmpty, "histogram buckets must ascend")
        return Histogram(
            family: declare(name, help: help, kind: .histogram, labels: labels, buckets: buckets), registry: self)
    }

    /// Runs `collect` before every read of the registry: for gauges read from elsewhere (the
    /// database, `/proc`) only when someone looks.
    public func addCollector(_ collect: @escaping @Sendable () -> Void) {
        state.withLock { $0.collectors.append(collect) }
    }

    /// Every family after running the collectors, in declaration order.
    public func snapshot() -> [Family] {
        let collectors = state.withLock { $0.collectors }
        for collect in collectors { collect() }
        return state.withLock { $0.families }
    }

    private func declare(_ name: String, help: String, kind: Kind, labels: [String], buckets: [Double]) -> Int {
        state.withLock { state in
            if let existing = state.byName[name] {
                precondition(state.families[existing].kind == kind, "metric \(name) declared twice as different kinds")
                return existing
            }
            state.families.append(Family(name: name, help: help, kind: kind, labelNames: labels, buckets: buckets))
            state.byName[name] = state.families.count - 1
            if labels.isEmpty {
                state.families[state.families.count - 1].series.append(
                    Series(labels: [], bucketCounts: Array(repeating: 0, count: buckets.count)))
                state.families[state.families.count - 1].index[[]] = 0
            }
            return state.families.count - 1
        }
    }

    /// Applies `change` to the series of `labels` in family `family`, creating it at zero.
    fileprivate func update(_ family: Int, _ labels: [String], _ change: (inout Series, [Double]) -> Void) {
        state.withLock { state in
            var labels = labels
            precondition(
                labels.count == state.families[family].labelNames.count,
                "metric \(state.families[family].name) takes labels \(state.families[family].labelNames)")
            if state.families[family].index[labels] == nil,
                state.families[family].series.count >= Self.maximumSeries
            {
                labels = Array(repeating: "other", count: labels.count)
            }
            let buckets = state.families[family].buckets
            let position: Int
            if let existing = state.families[family].index[labels] {
                position = existing
            } else {
                state.families[family].series.append(
                    Series(labels: labels, bucketCounts: Array(repeating: 0, count: buckets.count)))
                position = state.families[family].series.count - 1
                state.families[family].index[labels] = position
            }
            change(&state.families[family].series[position], buckets)
        }
    }

    /// Replaces every series of a family at once: a collector's reading of counts kept elsewhere.
    fileprivate func replace(_ family: Int, with series: [Series]) {
        state.withLock { state in
            let bounded = Array(series.prefix(Self.maximumSeries))
            state.families[family].series = bounded
            state.families[family].index = Dictionary(
                bounded.enumerated().map { ($0.element.labels, $0.offset) }, uniquingKeysWith: { first, _ in first })
        }
    }
}

/// A monotonically increasing count (`_total`).
public struct Counter: Sendable {
    fileprivate let family: Int
    /// Weak: a registry's collectors hold its metrics, so a strong reference back would keep every
    /// registry (and what its collectors read, a whole store) alive for good. A metric outliving its
    /// registry records nothing.
    fileprivate weak let registry: MetricsRegistry?

    public func increment(_ labels: [String] = [], by amount: Double = 1) {
        precondition(amount >= 0, "counters only go up")
        registry?.update(family, labels) { series, _ in series.value += amount }
    }

    /// Sets every series from totals another component keeps (read by a collector).
    public func setAll(_ totals: [([String], Double)]) {
        registry?.replace(family, with: totals.map { MetricsRegistry.Series(labels: $0.0, value: $0.1) })
    }
}

/// A value that goes up and down.
public struct Gauge: Sendable {
    fileprivate let family: Int
    /// Weak: a registry's collectors hold its metrics, so a strong reference back would keep every
    /// registry (and what its collectors read, a whole store) alive for good. A metric outliving its
    /// registry records nothing.
    fileprivate weak let registry: MetricsRegistry?

    public func set(_ value: Double, _ labels: [String] = []) {
        registry?.update(family, labels) { series, _ in series.value = value }
    }

    /// Sets every series at once; label sets not given disappear (e.g. a status with no orders left).
    public func replaceAll(_ values: [([String], Double)]) {
        registry?.replace(family, with: values.map { MetricsRegistry.Series(labels: $0.0, value: $0.1) })
    }
}

/// Observations counted into buckets, with their sum and count.
public struct Histogram: Sendable {
    fileprivate let family: Int
    /// Weak: a registry's collectors hold its metrics, so a strong reference back would keep every
    /// registry (and what its collectors read, a whole store) alive for good. A metric outliving its
    /// registry records nothing.
    fileprivate weak let registry: MetricsRegistry?

    /// Sets every series from histograms another component keeps; `bucketCounts` are cumulative and
    /// follow the family's buckets.
    public func setAll(_ series: [(labels: [String], bucketCounts: [UInt64], sum: Double, count: UInt64)]) {
        registry?.replace(
            family,
            with: series.map {
                MetricsRegistry.Series(labels: $0.labels, bucketCounts: $0.bucketCounts, sum: $0.sum, count: $0.count)
            })
    }

    public func observe(_ value: Double, _ labels: [String] = []) {
        registry?.update(family, labels) { series, buckets in
            for (index, bound) in buckets.enumerated() where value <= bound { series.bucketCounts[index] += 1 }
            series.sum += value
            series.count += 1
        }
    }
}
