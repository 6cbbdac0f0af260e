import DeliveryActivityContract
import Foundation
public import HTTPServer
import OrderDomain
import Pusher
public import Storage
public import Telemetry

/// The API's metric families, and the gauges read from storage when metrics are read.
struct APIMetrics: Sendable {
    let transitions: Counter
    let ordersCreated: Counter
    let activityEvents: Counter
    let rateLimited: Counter
    let ridesStored: Counter
    let ridePushesQueued: Counter
    let stalledStarts: Counter

    init(registry: MetricsRegistry, store: any DeliveryStore, rides: RideTracker) {
        let positions = registry.counter(
            "deliveryd_rider_positions_total",
            help: "Rider positions received, by outcome (accepted, out_of_order, inaccurate).", labels: ["outcome"])
        ridesStored = registry.counter(
            "deliveryd_ride_stores_total", help: "Ride states stored from positions (each coalesces many).")
        ridePushesQueued = registry.counter(
            "deliveryd_ride_pushes_queued_total", help: "Pushes queued because a ride changed what the customer sees.")
        let tracked = registry.gauge("deliveryd_rides_tracked", help: "Rides whose positions are kept in memory.")
        transitions = registry.counter(
            "deliveryd_order_transitions_total", help: "Applied status changes, by from and to status.",
            labels: ["from", "to"])
        ordersCreated = registry.counter("deliveryd_orders_created_total", help: "Orders created.")
        activityEvents = PushMetrics.activityEvents(registry)
        stalledStarts = registry.counter(
            "deliveryd_stalled_remote_starts_total",
            help:
                "Push-to-starts APNs accepted whose activity registered no update token in time (Live Activities off, the app not woken), by app.",
            labels: ["app"])
        rateLimited = registry.counter(
            "deliveryd_rate_limited_total", help: "Requests answered 429 rate_limited, by the limit they hit.",
            labels: ["limit"])

        let orders = registry.gauge("deliveryd_orders", help: "Orders by current status.", labels: ["status"])
        let depth = registry.gauge("deliveryd_outbox_depth", help: "Pushes waiting to be sent or in flight.")
        let oldest = registry.gauge(
            "deliveryd_outbox_oldest_due_age_seconds", help: "How long the oldest waiting push has been due.")
        let dead = registry.gauge("deliveryd_dead_letters", help: "Pushes kept as dead letters.")
        registry.addCollector {
            let now = Date()
            tracked.set(Double(rides.count))
            positions.setAll(rides.positionCounts.map { ([$0.outcome], Double($0.count)) })
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

/// HTTP request counts and durations by route, read from the server's own per-loop tallies when
/// metrics are read (counting into the registry on every request would put a shared lock on the
/// request path).
public enum HTTPMetrics {
    public static func register(
        in registry: MetricsRegistry, statistics: @escaping @Sendable () -> RequestStatistics,
        connections: @escaping @Sendable () -> ConnectionStatistics
    ) {
        let requests = registry.counter(
            "deliveryd_http_requests_total", help: "HTTP requests answered, by method, route and status.",
            labels: ["method", "route", "status"])
        let duration = registry.histogram(
            "deliveryd_http_request_duration_seconds", help: "Time to answer an HTTP request, by method and route.",
            labels: ["method", "route"], buckets: RequestStatistics.durationBuckets)
        let open = registry.gauge("deliveryd_http_open_connections", help: "Open client connections.")
        let limit = registry.gauge(
            "deliveryd_http_connection_limit",
            help: "The most client connections held at once: the configured cap, lowered to fit the open-file limit.")
        let refused = registry.counter(
            "deliveryd_http_connections_refused_total",
            help:
                "Connections closed as soon as accepted: the server was full (limit) or their address was (per_address).",
            labels: ["reason"])
        let acceptPauses = registry.counter(
            "deliveryd_http_accept_pauses_total",
            help: "Times accepting paused for a moment because the process ran out of descriptors or memory.")
        registry.addCollector {
            let current = statistics()
            requests.setAll(
                current.requests.map {
                    ([$0.key.method, $0.key.route ?? "unmatched", String($0.key.status)], Double($0.value))
                }
                .sorted { $0.0.lexicographicallyPrecedes($1.0) })
            duration.setAll(
                current.durations.map {
                    ([$0.key.method, $0.key.route ?? "unmatched"], $0.value.bucketCounts, $0.value.sum, $0.value.count)
                }.sorted { $0.0.lexicographicallyPrecedes($1.0) })
            let held = connections()
            open.set(Double(held.open))
            limit.set(Double(held.limit))
            refused.setAll([
                (["limit"], Double(held.refusedAtLimit)), (["per_address"], Double(held.refusedPerAddress)),
            ])
            acceptPauses.setAll([([], Double(held.acceptPauses))])
        }
    }
}

/// How well writes share commits and syncs: each write is answered after a sync of the disk, so
/// writes per sync is what lets the write rate pass the disk's sync rate.
public enum StorageMetrics {
    public static func register(in registry: MetricsRegistry, statistics: GroupCommitStatistics) {
        let commits = registry.counter(
            "deliveryd_storage_commits_total", help: "Write transactions committed (or failed).")
        let writes = registry.counter(
            "deliveryd_storage_writes_total", help: "Writes carried by those transactions (requests, push outcomes).")
        let largest = registry.gauge(
            "deliveryd_storage_largest_commit_writes", help: "The most writes one transaction carried so far.")
        let transactionSeconds = registry.counter(
            "deliveryd_storage_transaction_seconds_total",
            help: "Time the writer connection spent in transactions (BEGIN to the end of COMMIT).")
        let syncs = registry.counter(
            "deliveryd_storage_syncs_total",
            help: "Syncs of the write-ahead log that confirmed commits (synchronous=full), beside the writer.")
        let syncSeconds = registry.counter(
            "deliveryd_storage_sync_seconds_total", help: "Time those syncs took: the disk's.")
        registry.addCollector {
            let current = statistics.snapshot
            commits.setAll([([], Double(current.commits))])
            writes.setAll([([], Double(current.writes))])
            largest.set(Double(current.largest))
            transactionSeconds.setAll([([], current.transactionSeconds)])
            syncs.setAll([([], Double(current.syncs))])
            syncSeconds.setAll([([], current.syncSeconds)])
        }
    }
}

extension StorageMetrics {
    /// The database connections of a node on PostgreSQL: a pool always full with callers waiting
    /// wants more connections (`--database-pool-size`), an unreachable database wants an operator.
    public static func register(in registry: MetricsRegistry, pool: @escaping @Sendable () -> ConnectionPoolHealth) {
        let connections = registry.gauge(
            "deliveryd_database_connections", help: "Database connections this node holds, by state (busy, idle).",
            labels: ["state"])
        let waiting = registry.gauge(
            "deliveryd_database_waiting_callers", help: "Callers waiting for a free database connection.")
        let reachable = registry.gauge(
            "deliveryd_database_reachable", help: "1 while the database answers, 0 after a failed connect.")
        registry.addCollector {
            let health = pool()
            connections.replaceAll([(["busy"], Double(health.open - health.idle)), (["idle"], Double(health.idle))])
            waiting.set(Double(health.waiting))
            reachable.set(health.reachable ? 1 : 0)
        }
    }
}
