public import FoundationEssentials
public import Telemetry

/// The figures the dashboard draws over time, read from the metrics registry: what
/// `GET /v1/admin/stats?history=all` serves, so that every operator sees the same curves.
///
/// Counters are kept cumulative, so that the page computes any rate over any window (and the push
/// latency quantile over it, from the buckets), and a sample taken late shifts no figure.
public enum DashboardHistory {
    /// The names read as they are; every other name is a cumulative count.
    public static let gauges: Set<String> = [
        "orders.open", "outbox.depth", "outbox.oldestDueAgeSeconds", "deadLetters", "http.openConnections",
        "process.residentBytes", "webhooks.pending",
    ]

    /// A history sampled every `step` seconds: an hour of samples and a day of every sixth at the
    /// default step of 10 s.
    public static func make(step: TimeInterval) -> MetricsHistory {
        MetricsHistory(step: step, gauges: gauges)
    }

    /// One sample from a registry snapshot.
    ///
    /// The four figures a Live Activity operator is asked for: `activities.started` (registered by
    /// the app or started by push-to-start), `updates.failed` (update and end pushes not accepted),
    /// `activities.ended.*` (by the system: token dead, 8 hours; by the user), and
    /// `failures.<reason>` (pushes not accepted, by APNs reason or transport failure).
    public static func sample(_ families: [MetricsRegistry.Family]) -> [(name: String, value: Double)] {
        func family(_ name: String) -> MetricsRegistry.Family? { families.first { $0.name == name } }
        func sum(_ name: String, where matches: ([String: String]) -> Bool = { _ in true }) -> Double {
            guard let family = family(name) else { return 0 }
            return family.series.filter { matches(Dictionary(uniqueKeysWithValues: zip(family.labelNames, $0.labels))) }
                .reduce(0) { $0 + $1.value }
        }
        func events(_ names: Set<String>) -> Double {
            sum("deliveryd_live_activity_events_total") { names.contains($0["event"] ?? "") }
        }
        var values: [(name: String, value: Double)] = [
            ("orders.created", sum("deliveryd_orders_created_total")),
            ("changes", sum("deliveryd_order_transitions_total")),
            ("orders.open", sum("deliveryd_orders") { $0["status"] != "delivered" && $0["status"] != "cancelled" }),
            ("pushes", sum("deliveryd_pushes_total")),
            ("pushes.accepted", sum("deliveryd_pushes_total") { $0["result"] == "accepted" }),
            ("pushes.failed", sum("deliveryd_push_failures_total")),
            ("pushes.retried", sum("deliveryd_push_retries_total")),
            ("updates.failed", sum("deliveryd_pushes_total") { $0["event"] != "start" && $0["result"] != "accepted" }),
            ("activities.started", events(["registered", "started_remotely"])),
            ("activities.ended.token_dead", events(["removed_by_system"])),
            ("activities.ended.expired", events(["expired"])),
            ("activities.ended.dismissed", events(["removed_by_user"])),
            ("outbox.depth", sum("deliveryd_outbox_depth")),
            ("outbox.oldestDueAgeSeconds", sum("deliveryd_outbox_oldest_due_age_seconds")),
            ("deadLetters", sum("deliveryd_dead_letters")),
            ("http.requests", sum("deliveryd_http_requests_total")),
            ("http.openConnections", sum("deliveryd_http_open_connections")),
            ("process.residentBytes", sum("deliveryd_process_resident_memory_bytes")),
            ("webhooks.delivered", sum("deliveryd_webhook_attempts_total") { $0["result"] == "delivered" }),
            ("webhooks.retried", sum("deliveryd_webhook_attempts_total") { $0["result"] == "retry" }),
            ("webhooks.failed", sum("deliveryd_webhook_attempts_total") { $0["result"] == "failed" }),
            ("webhooks.pending", sum("deliveryd_webhook_deliveries")),
        ]
        if let failures = family("deliveryd_push_failures_total"),
            let reason = failures.labelNames.firstIndex(of: "reason")
        {
            var byReason: [String: Double] = [:]
            for series in failures.series { byReason["failures." + series.labels[reason], default: 0] += series.value }
            values += byReason.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        }
        // Cumulative bucket counts: the page takes the difference of two samples and interpolates
        // the quantile over that window, as Prometheus' histogram_quantile does.
        if let latency = family("deliveryd_push_latency_seconds"), let series = latency.series.first {
            values.append(("latency.count", Double(series.count)))
            for (bound, count) in zip(latency.buckets, series.bucketCounts) {
                values.append(("latency.le." + MetricsRegistry.number(bound), Double(count)))
            }
        }
        return values
    }
}
