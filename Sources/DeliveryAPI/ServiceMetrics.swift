import Foundation
public import HTTPServer
import OrderDomain
import Pusher
import Storage
public import Telemetry

/// The API's metric families, and the gauges read from storage when metrics are read.
struct APIMetrics: Sendable {
    let transitions: Counter
    let ordersCreated: Counter
    let activityEvents: Counter

    init(registry: MetricsRegistry, store: any DeliveryStore) {
        transitions = registry.counter(
            "deliveryd_order_transitions_total", help: "Applied status changes, by from and to status.",
            labels: ["from", "to"])
        ordersCreated = registry.counter("deliveryd_orders_created_total", help: "Orders created.")
        activityEvents = PushMetrics.activityEvents(registry)

        let orders = registry.gauge("deliveryd_orders", help: "Orders by current status.", labels: ["status"])
        let depth = registry.gauge("deliveryd_outbox_depth", help: "Pushes waiting to be sent or in flight.")
        let oldest = registry.gauge(
            "deliveryd_outbox_oldest_due_age_seconds", help: "How long the oldest waiting push has been due.")
        let dead = registry.gauge("deliveryd_dead_letters", help: "Pushes kept as dead letters.")
        registry.addCollector {
            let now = Date()
            if let counts = try? store.orderCountsByStatus() {
                orders.replaceAll(OrderStatus.allCases.map { ([$0.rawValue], Double(counts[$0] ?? 0)) })
            }
            if let queue = try? store.outboxDepth() {
                depth.set(Double(queue.count))
                oldest.set(max(0, queue.oldestDue.map { now.timeIntervalSince($0) } ?? 0))
            }
            if let count = try? store.deadLetterCount() { dead.set(Double(count)) }
        }
    }
}

/// HTTP request counts and durations by route, fed from the server's access log hook.
public struct HTTPMetrics: Sendable {
    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    private let requests: Counter
    private let duration: Histogram

    public init(registry: MetricsRegistry) {
        requests = registry.counter(
            "deliveryd_http_requests_total", help: "HTTP requests answered, by method, route and status.",
            labels: ["method", "route", "status"])
        duration = registry.histogram(
            "deliveryd_http_request_duration_seconds", help: "Time to answer an HTTP request, by method and route.",
            labels: ["method", "route"], buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5])
    }

    /// Counts one answered request; unmatched paths share the route label `unmatched`.
    public func record(_ entry: AccessLogEntry) {
        let method = Self.methods.contains(entry.method) ? entry.method : "other"
        let route = entry.route ?? "unmatched"
        requests.increment([method, route, String(entry.status)])
        duration.observe(entry.durationSeconds, [method, route])
    }
}
