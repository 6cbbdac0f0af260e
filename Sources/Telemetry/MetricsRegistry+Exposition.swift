import Foundation

extension MetricsRegistry {
    /// The Prometheus text exposition format, version 0.0.4.
    public func prometheusText() -> String {
        var text = ""
        for family in snapshot() {
            text += "# HELP \(family.name) \(Self.escapeHelp(family.help))\n"
            text += "# TYPE \(family.name) \(family.kind.rawValue)\n"
            for series in family.series {
                let pairs = zip(family.labelNames, series.labels).map { "\($0)=\"\(Self.escapeLabel($1))\"" }
                switch family.kind {
                case .counter, .gauge:
                    text += family.name + Self.labelText(pairs) + " " + Self.number(series.value) + "\n"
                case .histogram:
                    for (bound, count) in zip(family.buckets, series.bucketCounts) {
                        let labels = Self.labelText(pairs + ["le=\"\(Self.number(bound))\""])
                        text += "\(family.name)_bucket\(labels) \(count)\n"
                    }
                    text += "\(family.name)_bucket\(Self.labelText(pairs + ["le=\"+Inf\""])) \(series.count)\n"
                    text += "\(family.name)_sum\(Self.labelText(pairs)) \(Self.number(series.sum))\n"
                    text += "\(family.name)_count\(Self.labelText(pairs)) \(series.count)\n"
                }
            }
        }
        return text
    }

    /// A quantile estimated from a histogram series by linear interpolation within its bucket, as
    /// Prometheus' `histogram_quantile` does; `nil` without observations.
    public static func quantile(_ q: Double, of series: Series, buckets: [Double]) -> Double? {
        guard series.count > 0 else { return nil }
        let rank = q * Double(series.count)
        var lowerBound = 0.0
        var lowerCount = 0.0
        for (bound, cumulative) in zip(buckets, series.bucketCounts) {
            if Double(cumulative) >= rank {
                let inBucket = Double(cumulative) - lowerCount
                guard inBucket > 0 else { return bound }
                return lowerBound + (bound - lowerBound) * (rank - lowerCount) / inBucket
            }
            lowerBound = bound
            lowerCount = Double(cumulative)
        }
        return buckets.last
    }

    public static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value.rounded() == value, abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    private static func labelText(_ pairs: [String]) -> String {
        pairs.isEmpty ? "" : "{" + pairs.joined(separator: ",") + "}"
    }

    private static func escapeLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func escapeHelp(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
