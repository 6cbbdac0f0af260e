import Foundation
import Synchronization
import Testing

@testable import Telemetry

@Suite("Metrics registry")
struct MetricsRegistryTests {
    /// Counters, gauges and histograms render as Prometheus text 0.0.4: HELP and TYPE per family,
    /// escaped label values, cumulative buckets ending in +Inf, `_sum` and `_count`.
    @Test func rendersTheExpositionFormat() {
        let registry = MetricsRegistry()
        let requests = registry.counter(
            "deliveryd_test_requests_total", help: "Requests.", labels: ["route", "status"])
        let depth = registry.gauge("deliveryd_test_depth", help: "Depth.")
        let latency = registry.histogram("deliveryd_test_seconds", help: "Latency.", buckets: [0.1, 1])
        requests.increment(["/v1/orders/{id}", "200"])
        requests.increment(["/v1/orders/{id}", "200"], by: 2)
        requests.increment(["a\"b\\c\nd", "500"])
        depth.set(7)
        for value in [0.05, 0.5, 5] { latency.observe(value) }
        let text = registry.prometheusText()
        #expect(
            text == """
                # HELP deliveryd_test_requests_total Requests.
                # TYPE deliveryd_test_requests_total counter
                deliveryd_test_requests_total{route="/v1/orders/{id}",status="200"} 3
                deliveryd_test_requests_total{route="a\\"b\\\\c\\nd",status="500"} 1
                # HELP deliveryd_test_depth Depth.
                # TYPE deliveryd_test_depth gauge
                deliveryd_test_depth 7
                # HELP deliveryd_test_seconds Latency.
                # TYPE deliveryd_test_seconds histogram
                deliveryd_test_seconds_bucket{le="0.1"} 1
                deliveryd_test_seconds_bucket{le="1"} 2
                deliveryd_test_seconds_bucket{le="+Inf"} 3
                deliveryd_test_seconds_sum 5.55
                deliveryd_test_seconds_count 3

                """)
    }

    /// A family stops growing at its series cap: further label sets fold into "other".
    @Test func seriesAreBounded() {
        let registry = MetricsRegistry()
        let counter = registry.counter("deliveryd_test_total", help: "x", labels: ["id"])
        for index in 0..<(MetricsRegistry.maximumSeries + 50) { counter.increment(["\(index)"]) }
        let family = registry.snapshot()[0]
        #expect(family.series.count == MetricsRegistry.maximumSeries + 1)
        #expect(family.series.last?.labels == ["other"] && family.series.last?.value == 50)
    }

    /// Quantiles interpolate within the bucket that holds the rank, as histogram_quantile does.
    @Test func quantilesFromBuckets() {
        let registry = MetricsRegistry()
        let histogram = registry.histogram("deliveryd_test_seconds", help: "x", buckets: [0.01, 0.02, 0.04])
        for _ in 0..<90 { histogram.observe(0.005) }
        for _ in 0..<10 { histogram.observe(0.03) }
        let family = registry.snapshot()[0]
        let p50 = MetricsRegistry.quantile(0.5, of: family.series[0], buckets: family.buckets)
        let p99 = MetricsRegistry.quantile(0.99, of: family.series[0], buckets: family.buckets)
        #expect(p50.map { abs($0 - 0.005556) < 0.0001 } == true)
        #expect(p99.map { abs($0 - 0.038) < 0.0001 } == true)
    }

    /// Collectors run before each read, so gauges show a fresh value.
    @Test func collectorsRunOnRead() {
        let registry = MetricsRegistry()
        let gauge = registry.gauge("deliveryd_test_orders", help: "x", labels: ["status"])
        let calls = Counted()
        registry.addCollector {
            calls.add()
            gauge.replaceAll([(["placed"], Double(calls.value))])
        }
        _ = registry.prometheusText()
        #expect(registry.prometheusText().contains("deliveryd_test_orders{status=\"placed\"} 2"))
    }
}

@Suite("Structured log lines")
struct LoggerTests {
    /// A line is one JSON object with time, level, logger, message and the fields, control
    /// characters escaped.
    @Test func linesAreJSONObjects() throws {
        let line = Logger.line(
            time: Date(timeIntervalSince1970: 0), level: .warning, label: "pusher", message: "push.failed",
            fields: ["apns.reason": "BadDeviceToken", "order.id": "o\n1", "http.status": 400])
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1)
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["level"] as? String == "warning" && object?["logger"] as? String == "pusher")
        #expect(object?["order.id"] as? String == "o\n1" && object?["http.status"] as? Int == 400)
        #expect((object?["time"] as? String)?.hasPrefix("1970-01-01T00:00:00") == true)
    }
}

private final class Counted: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
