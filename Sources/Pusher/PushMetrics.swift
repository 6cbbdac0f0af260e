public import Telemetry

/// The pusher's metric families; label values come from fixed sets and APNs and FCM error codes.
public struct PushMetrics: Sendable {
    /// Upper bounds for latencies, in seconds: milliseconds when healthy, minutes when retrying.
    public static let latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

    let pushes: Counter
    let failures: Counter
    let retries: Counter
    let tokensRemoved: Counter
    let activityEvents: Counter
    let changeToAnswer: Histogram
    let apnsRoundTrip: Histogram
    let fcmRoundTrip: Histogram
    let environmentPauses: Counter
    let projectPauses: Counter
    let merchantPushes: Counter

    public init(registry: MetricsRegistry) {
        pushes = registry.counter(
            "deliveryd_pushes_total",
            help: "Pushes answered by APNs or FCM (or not reached), by platform, event and result.",
            labels: ["platform", "event", "result"])
        failures = registry.counter(
            "deliveryd_push_failures_total",
            help: "Pushes APNs or FCM did not accept, by platform and the service's reason or transport failure.",
            labels: ["platform", "reason"])
        retries = registry.counter("deliveryd_push_retries_total", help: "Pushes scheduled for another attempt.")
        tokensRemoved = registry.counter(
            "deliveryd_tokens_removed_total", help: "Push tokens removed because APNs or the lifetime ended them.",
            labels: ["reason"])
        activityEvents = Self.activityEvents(registry)
        merchantPushes = registry.counter(
            "deliveryd_merchant_pushes_total",
            help: "Pushes answered by APNs (or not reached), by merchant and whether APNs accepted them.",
            labels: ["merchant", "result"])
        environmentPauses = registry.counter(
            "deliveryd_apns_environment_pauses_total",
            help: "Times sending to an APNs environment was paused because APNs refused our credentials or topic.",
            labels: ["environment", "reason"])
        projectPauses = registry.counter(
            "deliveryd_fcm_project_pauses_total",
            help: "Times sending to a Firebase project was paused because FCM refused our credentials or sender.",
            labels: ["project", "reason"])
        changeToAnswer = registry.histogram(
            "deliveryd_push_latency_seconds", help: "From the committed change to the APNs or FCM answer of its push.",
            buckets: Self.latencyBuckets)
        apnsRoundTrip = registry.histogram(
            "deliveryd_apns_request_duration_seconds", help: "One APNs request, sent to answered.",
            buckets: Self.latencyBuckets)
        fcmRoundTrip = registry.histogram(
            "deliveryd_fcm_request_duration_seconds", help: "One FCM request, sent to answered.",
            buckets: Self.latencyBuckets)
    }

    /// The family of Live Activity lifecycle events, shared with the API (registered, removed by the user).
    public static func activityEvents(_ registry: MetricsRegistry) -> Counter {
        registry.counter(
            "deliveryd_live_activity_events_total",
            help:
                "Live Activities registered, rotated, started remotely, updated, ended, expired, removed by the system or the user.",
            labels: ["event"])
    }
}
