import DeliveryActivityContract
import Foundation
import HTTPServer
import OrderDomain
import Storage
import Telemetry

extension DeliveryService {
    /// `GET /metrics`: Prometheus text exposition 0.0.4, for admins.
    func showMetrics(_ call: Call) throws -> HTTPResponse {
        guard case .staff(.admin, _) = call.caller else { throw APIError.forbidden("this needs an admin key") }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
            body: Array(registry.prometheusText().utf8))
    }

    /// `GET /v1/admin/stats`: the figures of `/metrics` as JSON, with a summary the dashboard reads
    /// directly, the last 50 push failures, the orders waiting longest in each open status, how
    /// pushes leave the process, a per-merchant breakdown, the webhook endpoints that fail or were
    /// disabled, and with `history=all` (or
    /// `historySince=UNIX_MS`: only newer samples) the sampled history of `DashboardHistory`.
    func showStats(_ call: Call) throws -> HTTPResponse {
        let request = try statsRequest(call)
        var history: [UInt8]?
        if let since = request.historySince {
            history = self.history.json(sinceMilliseconds: since)
        } else if request.wantsHistory {
            history = statsSnapshots.history { self.history.json() }
        }
        return statsResponse(summary: try statsSnapshots.summary { try statsSummary(now: clock()) }, history: history)
    }

    /// `showStats` from the snapshots and the newest samples alone, on the event loop; `nil` when a
    /// part would have to be built (the first request after an idle minute) or the samples asked
    /// for are more than a periodic poll's (`recentSamplesFromMemory` a tier).
    func showStatsFromMemory(_ call: Call) throws -> HTTPResponse? {
        let request = try statsRequest(call)
        guard let summary = statsSnapshots.cachedSummary() else { return nil }
        let history: [UInt8]?
        if let since = request.historySince {
            history = self.history.recentJSON(sinceMilliseconds: since, limit: Self.recentSamplesFromMemory)
        } else if request.wantsHistory {
            history = statsSnapshots.cachedHistory()
        } else {
            return statsResponse(summary: summary, history: nil)
        }
        return history.map { statsResponse(summary: summary, history: $0) }
    }

    /// The most samples of a tier a `historySince` poll gets from memory: the page polls every few
    /// seconds, so it asks for one or two.
    static let recentSamplesFromMemory = 60

    /// What a stats request asks for. - Throws: `403` but for an admin, `422` for a bad query.
    private func statsRequest(_ call: Call) throws -> (wantsHistory: Bool, historySince: Int64?) {
        guard case .staff(.admin, _) = call.caller else { throw APIError.forbidden("this needs an admin key") }
        let query = try Self.queryItems(call.request.query, allowed: ["history", "historySince"])
        if let mode = query["history"], mode != "all" {
            throw APIError.validationFailed([FieldIssue(field: "history", problem: "must be all")])
        }
        guard let since = query["historySince"] else { return (query["history"] != nil, nil) }
        guard let milliseconds = Int64(since), milliseconds >= 0 else {
            throw APIError.validationFailed([
                FieldIssue(field: "historySince", problem: "must be a time in Unix milliseconds")
            ])
        }
        return (true, milliseconds)
    }

    private func statsResponse(summary: [UInt8], history: [UInt8]?) -> HTTPResponse {
        guard let history else { return json(200, .fragment(summary)) }
        // The summary is one JSON object: the history goes in as its last member.
        var body = summary
        body.removeLast()
        body += Array(#","history":"#.utf8) + history + [UInt8(ascii: "}")]
        return json(200, .fragment(body))
    }

    /// Empties the key cache when a stored key changed through any node or the `keys` command (a
    /// maintenance job, twice a second: how long a revocation made elsewhere takes to be seen).
    public func checkKeyChanges() {
        apiKeys.confirm(read: store.apiKeyGeneration)
    }

    /// Rebuilds the dashboard's snapshots while someone looks at them (a maintenance job, every second).
    public func refreshStatsSnapshots() {
        do {
            try statsSnapshots.refresh(summary: { try statsSummary(now: clock()) }, history: { history.json() })
        } catch {
            logger.warning("stats.refresh_failed", ["error": .string("\(error)")])
        }
    }

    /// Everything the dashboard shows but the history, as one JSON object.
    private func statsSummary(now: Date) throws -> [UInt8] {
        let families = registry.snapshot()
        func family(_ name: String) -> MetricsRegistry.Family? { families.first { $0.name == name } }
        func total(_ name: String, where matches: ([String: String]) -> Bool = { _ in true }) -> Double {
            guard let family = family(name) else { return 0 }
            return family.series.filter { matches(Dictionary(uniqueKeysWithValues: zip(family.labelNames, $0.labels))) }
                .reduce(0) { $0 + $1.value }
        }
        func byLabel(_ name: String, _ label: String) -> JSONValue {
            guard let family = family(name), let position = family.labelNames.firstIndex(of: label) else {
                return .object([:])
            }
            var sums: [String: Double] = [:]
            for series in family.series { sums[series.labels[position], default: 0] += series.value }
            return .object(sums.mapValues { .number($0) })
        }
        func latency(_ name: String) -> JSONValue {
            guard let family = family(name), let series = family.series.first else { return .null }
            let p50 = MetricsRegistry.quantile(0.5, of: series, buckets: family.buckets)
            let p99 = MetricsRegistry.quantile(0.99, of: series, buckets: family.buckets)
            return .object([
                "count": .number(Double(series.count)), "p50Seconds": p50.map(JSONValue.number) ?? .null,
                "p99Seconds": p99.map(JSONValue.number) ?? .null,
            ])
        }

        let accepted = total("deliveryd_pushes_total") { $0["result"] == "accepted" }
        let summary: [String: JSONValue] = [
            "orders": byLabel("deliveryd_orders", "status"),
            "ordersCreated": .number(total("deliveryd_orders_created_total")),
            "transitions": .number(total("deliveryd_order_transitions_total")),
            "pushes": .object([
                "total": .number(total("deliveryd_pushes_total")), "accepted": .number(accepted),
                "failed": .number(total("deliveryd_push_failures_total")),
                "retried": .number(total("deliveryd_push_retries_total")),
                "byResult": byLabel("deliveryd_pushes_total", "result"),
                "byEvent": byLabel("deliveryd_pushes_total", "event"),
                "byPlatform": byLabel("deliveryd_pushes_total", "platform"),
                "failedByPlatform": byLabel("deliveryd_push_failures_total", "platform"),
            ]),
            "failuresByReason": byLabel("deliveryd_push_failures_total", "reason"),
            "tokensRemoved": byLabel("deliveryd_tokens_removed_total", "reason"),
            "liveActivities": byLabel("deliveryd_live_activity_events_total", "event"),
            "outbox": .object([
                "depth": .number(total("deliveryd_outbox_depth")),
                "oldestDueAgeSeconds": .number(total("deliveryd_outbox_oldest_due_age_seconds")),
                "deadLetters": .number(total("deliveryd_dead_letters")),
            ]),
            "webhooks": .object([
                "attempts": byLabel("deliveryd_webhook_attempts_total", "result"),
                "queue": byLabel("deliveryd_webhook_deliveries", "state"),
                "oldestPendingAgeSeconds": .number(total("deliveryd_webhook_oldest_pending_age_seconds")),
                "endpoints": byLabel("deliveryd_webhook_endpoints", "health"),
                "endpointsDisabled": .number(total("deliveryd_webhook_endpoints_disabled_total")),
            ]),
            "pushLatency": latency("deliveryd_push_latency_seconds"),
            "apnsLatency": latency("deliveryd_apns_request_duration_seconds"),
            "http": .object([
                "requests": .number(total("deliveryd_http_requests_total")),
                "serverErrors": .number(
                    total("deliveryd_http_requests_total") { $0["status"]?.hasPrefix("5") == true }),
                "openConnections": .number(total("deliveryd_http_open_connections")),
            ]),
            "process": .object([
                "residentBytes": .number(total("deliveryd_process_resident_memory_bytes")),
                "openFds": .number(total("deliveryd_process_open_fds")),
                "uptimeSeconds": .number(total("deliveryd_process_uptime_seconds")),
            ]),
        ]
        let failures = try store.recentPushFailures(limit: 50).map { attempt -> JSONValue in
            .object([
                "orderId": .string(attempt.orderID), "target": .string(attempt.targetID),
                "event": .string(attempt.event),
                "httpStatus": attempt.httpStatus.map { .number(Double($0)) } ?? .null,
                "reason": .optional(attempt.reason), "requestId": .optional(attempt.requestID),
                "attemptedAt": .time(attempt.attemptedAt),
            ])
        }
        let stuck = try store.oldestOpenOrders().map { entry -> JSONValue in
            .object([
                "status": .string(entry.status.rawValue), "orderId": .string(entry.orderID),
                "merchantId": .string(entry.merchantID), "number": .string(entry.number), "since": .time(entry.since),
                "waitingSeconds": .number(max(0, now.timeIntervalSince(entry.since)).rounded()),
                "ordersInStatus": .number(Double(entry.count)),
            ])
        }
        let members: [String: JSONValue] = [
            "generatedAt": .time(now), "summary": .object(summary), "recentFailures": .array(failures),
            "stuckOrders": .array(stuck), "metrics": .array(families.map(Self.familyJSON)),
            "node": .object([
                "name": .string(configuration.nodeName),
                "pid": .number(Double(ProcessInfo.processInfo.processIdentifier)),
                "startedAt": .time(startedAt),
                "version": .string(configuration.build.version), "commit": .string(configuration.build.commit),
                "built": .string(configuration.build.date),
            ]),
            "sending": Self.sendingJSON(sendingStatus(now)),
            "merchants": .array(try merchantBreakdown(family("deliveryd_merchant_pushes_total"))),
            "webhookEndpoints": .array(try unhealthyWebhookEndpoints()),
        ]
        return JSONValue.object(members).encoded
    }

    /// The webhook endpoints that need a look, at most 50: disabled ones first, then those failing
    /// longest. Healthy endpoints are only counted (`summary.webhooks.endpoints`).
    private func unhealthyWebhookEndpoints() throws -> [JSONValue] {
        let unhealthy = try store.webhookEndpoints(merchantID: nil).filter { !$0.enabled || $0.failingSince != nil }
        let ordered = unhealthy.sorted {
            ($0.enabled ? 1 : 0, $0.failingSince ?? .distantFuture, $0.id) < (
                $1.enabled ? 1 : 0, $1.failingSince ?? .distantFuture, $1.id
            )
        }
        return try ordered.prefix(50).map { endpoint in
            let counts = try store.webhookQueueCounts(endpointID: endpoint.id)
            return .object([
                "id": .string(endpoint.id), "merchantId": .string(endpoint.merchantID),
                "host": .string(URL(string: endpoint.url)?.host() ?? endpoint.url),
                "health": .string(endpoint.enabled ? "failing" : "disabled"),
                "failingSince": .time(endpoint.failingSince), "disabledReason": .optional(endpoint.disabledReason),
                "lastDeliveredAt": .time(endpoint.lastDeliveredAt),
                "pending": .number(Double(counts.pending + counts.sending)),
            ])
        }
    }

    /// The most merchants the breakdown lists: those with the most open orders, then the most pushes.
    static let merchantBreakdownLimit = 50

    private func merchantBreakdown(_ pushes: MetricsRegistry.Family?) throws -> [JSONValue] {
        var rows: [String: (open: Int, accepted: Double, failed: Double)] = [:]
        for entry in try store.openOrderCountsByMerchant(limit: Self.merchantBreakdownLimit) {
            rows[entry.merchantID] = (entry.openOrders, 0, 0)
        }
        if let pushes, let merchant = pushes.labelNames.firstIndex(of: "merchant"),
            let result = pushes.labelNames.firstIndex(of: "result")
        {
            for series in pushes.series {
                var row = rows[series.labels[merchant]] ?? (0, 0, 0)
                if series.labels[result] == "accepted" {
                    row.accepted += series.value
                } else {
                    row.failed += series.value
                }
                rows[series.labels[merchant]] = row
            }
        }
        return rows.sorted {
            ($0.value.open, $0.value.accepted + $0.value.failed, $1.key) > (
                $1.value.open, $1.value.accepted + $1.value.failed, $0.key
            )
        }
        .prefix(Self.merchantBreakdownLimit)
        .map { merchantID, row in
            .object([
                "merchantId": .string(merchantID), "openOrders": .number(Double(row.open)),
                "pushesAccepted": .number(row.accepted), "pushesFailed": .number(row.failed),
            ])
        }
    }

    private static func sendingJSON(_ status: PushSendingStatus) -> JSONValue {
        .object([
            "sender": .string(status.sender.rawValue), "apps": .array(status.apps.map(JSONValue.string)),
            "environments": .array(
                status.environments.map { environment in
                    .object([
                        "environment": .string(environment.environment.rawValue),
                        "state": environment.pausedUntil == nil ? "sending" : "paused",
                        "pausedUntil": .time(environment.pausedUntil), "reason": .optional(environment.reason),
                        "confirmed": .bool(environment.confirmed),
                    ])
                }),
            "android": status.android.map { android in
                .object([
                    "project": .string(android.project), "state": android.pausedUntil == nil ? "sending" : "paused",
                    "pausedUntil": .time(android.pausedUntil), "reason": .optional(android.reason),
                ])
            } ?? .null,
        ])
    }

    private static func familyJSON(_ family: MetricsRegistry.Family) -> JSONValue {
        .object([
            "name": .string(family.name), "help": .string(family.help), "type": .string(family.kind.rawValue),
            "series": .array(
                family.series.map { series in
                    var members: [String: JSONValue] = [
                        "labels": .object(
                            Dictionary(
                                uniqueKeysWithValues: zip(family.labelNames, series.labels.map(JSONValue.string))))
                    ]
                    if family.kind == .histogram {
                        members["count"] = .number(Double(series.count))
                        members["sum"] = .number(series.sum)
                        members["buckets"] = .array(
                            zip(family.buckets, series.bucketCounts).map {
                                .object(["le": .number($0), "count": .number(Double($1))])
                            })
                    } else {
                        members["value"] = .number(series.value)
                    }
                    return .object(members)
                }),
        ])
    }
}
