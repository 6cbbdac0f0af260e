import Synchronization

/// Every metric of the process, rendered as Prometheus text or as JSON values.
///
/// Families are declared once (name, help, kind, label names) and handed out as small `Sendable`
/// handles (`Counter`, `Gauge`, `Histogram`) that the modules keep. Label values must come from
/// bounded sets (routes, statuses, reasons), never from ids or tokens; past `maximumSeries` label
/// sets a family folds new ones into `{…="other"}` so a bug cannot eat the memory.
///
/// Each family has its own lock, and a handle holds its family's storage, not the registry: with
/// one lock for the registry every push and request of every thread met on it, and a weak
/// reference back to the registry cost an atomic operation at each copy and use of a handle.
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

    /// A family as read at one moment; `series` are in the order they first appeared.
    public struct Family: Sendable {
        public let name: String
        public let help: String
        public let kind: Kind
        public let labelNames: [String]
        public let buckets: [Double]
        public fileprivate(set) var series: [Series] = []
    }

    public static let maximumSeries = 500

    private struct State {
        var families: [FamilyStorage] = []
        var byName: [String: Int] = [:]
        var collectors: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        Counter(storage: declare(name, help: help, kind: .counter, labels: labels, buckets: []))
    }

    public func gauge(_ name: String, help: String, labels: [String] = []) -> Gauge {
        Gauge(storage: declare(name, help: help, kind: .gauge, labels: labels, buckets: []))
    }

    /// - Parameter buckets: upper bounds in ascending order; `+Inf` is added.
    public func histogram(_ name: String, help: String, labels: [String] = [], buckets: [Double]) -> Histogram {
        precondition(buckets == buckets.sorted() && !buckets.isEmpty, "histogram buckets must ascend")
        return Histogram(storage: declare(name, help: help, kind: .histogram, labels: labels, buckets: buckets))
    }

    /// Runs `collect` before every read of the registry: for gauges read from elsewhere (the
    /// database, `/proc`) only when someone looks.
    public func addCollector(_ collect: @escaping @Sendable () -> Void) {
        state.withLock { $0.collectors.append(collect) }
    }

    /// Every family after running the collectors, in declaration order.
    public func snapshot() -> [Family] {
        let (collectors, families) = state.withLock { ($0.collectors, $0.families) }
        for collect in collectors { collect() }
        return families.map(\.snapshot)
    }

    private func declare(_ name: String, help: String, kind: Kind, labels: [String], buckets: [Double])
        -> FamilyStorage
    {
        state.withLock { state in
            if let existing = state.byName[name] {
                precondition(state.families[existing].kind == kind, "metric \(name) declared twice as different kinds")
                return state.families[existing]
            }
            let storage = FamilyStorage(
                Family(name: name, help: help, kind: kind, labelNames: labels, buckets: buckets))
            state.families.append(storage)
            state.byName[name] = state.families.count - 1
            return storage
        }
    }
}

/// One family's declaration and series, behind the family's own lock.
final class FamilyStorage: Sendable {
    private struct Table {
        var series: [MetricsRegistry.Series] = []
        var index: [[String]: Int] = [:]
    }

    private let declaration: MetricsRegistry.Family
    private let table: Mutex<Table>

    init(_ declaration: MetricsRegistry.Family) {
        self.declaration = declaration
        var table = Table()
        if declaration.labelNames.isEmpty {
            table.series.append(
                MetricsRegistry.Series(labels: [], bucketCounts: Array(repeating: 0, count: declaration.buckets.count)))
            table.index[[]] = 0
        }
        self.table = Mutex(table)
    }

    var kind: MetricsRegistry.Kind { declaration.kind }

    var snapshot: MetricsRegistry.Family {
        var family = declaration
        family.series = table.withLock { $0.series }
        return family
    }

    /// Applies `change` to the series of `labels`, creating it at zero.
    func update(_ labels: [String], _ change: (inout MetricsRegistry.Series, [Double]) -> Void) {
        precondition(
            labels.count == declaration.labelNames.count,
            "metric \(declaration.name) takes labels \(declaration.labelNames)")
        let buckets = declaration.buckets
        table.withLock { table in
            if let existing = table.index[labels] {
                change(&table.series[existing], buckets)
                return
            }
            let labels =
                table.series.count >= MetricsRegistry.maximumSeries
                ? Array(repeating: "other", count: labels.count) : labels
            let position: Int
            if let existing = table.index[labels] {
                position = existing
            } else {
                table.series.append(
                    MetricsRegistry.Series(labels: labels, bucketCounts: Array(repeating: 0, count: buckets.count)))
                position = table.series.count - 1
                table.index[labels] = position
            }
            change(&table.series[position], buckets)
        }
    }

    /// Replaces every series at once: a collector's reading of counts kept elsewhere.
    func replace(with series: [MetricsRegistry.Series]) {
        let bounded = Array(series.prefix(MetricsRegistry.maximumSeries))
        let index = Dictionary(
            bounded.enumerated().map { ($0.element.labels, $0.offset) }, uniquingKeysWith: { first, _ in first })
        table.withLock { $0 = Table(series: bounded, index: index) }
    }
}

/// A monotonically increasing count (`_total`).
public struct Counter: Sendable {
    /// The family's storage, not the registry: a registry's collectors hold its metrics, so a
    /// reference back to the registry would keep it (and what its collectors read, a whole store)
    /// alive for good.
    fileprivate let storage: FamilyStorage

    public func increment(_ labels: [String] = [], by amount: Double = 1) {
        precondition(amount >= 0, "counters only go up")
        storage.update(labels) { series, _ in series.value += amount }
    }

    /// Sets every series from totals another component keeps (read by a collector).
    public func setAll(_ totals: [([String], Double)]) {
        storage.replace(with: totals.map { MetricsRegistry.Series(labels: $0.0, value: $0.1) })
    }
}

/// A value that goes up and down.
public struct Gauge: Sendable {
    /// The family's storage (see `Counter.storage`).
    fileprivate let storage: FamilyStorage

    public func set(_ value: Double, _ labels: [String] = []) {
        storage.update(labels) { series, _ in series.value = value }
    }

    /// Sets every series at once; label sets not given disappear (e.g. a status with no orders left).
    public func replaceAll(_ values: [([String], Double)]) {
        storage.replace(with: values.map { MetricsRegistry.Series(labels: $0.0, value: $0.1) })
    }
}

/// Observations counted into buckets, with their sum and count.
public struct Histogram: Sendable {
    /// The family's storage (see `Counter.storage`).
    fileprivate let storage: FamilyStorage

    /// Sets every series from histograms another component keeps; `bucketCounts` are cumulative and
    /// follow the family's buckets.
    public func setAll(_ series: [(labels: [String], bucketCounts: [UInt64], sum: Double, count: UInt64)]) {
        storage.replace(
            with: series.map {
                MetricsRegistry.Series(labels: $0.labels, bucketCounts: $0.bucketCounts, sum: $0.sum, count: $0.count)
            })
    }

    public func observe(_ value: Double, _ labels: [String] = []) {
        storage.update(labels) { series, buckets in
            for (index, bound) in buckets.enumerated() where value <= bound { series.bucketCounts[index] += 1 }
            series.sum += value
            series.count += 1
        }
    }
}
