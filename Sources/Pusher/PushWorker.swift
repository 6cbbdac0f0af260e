public import Foundation
internal import OrderDomain
public import Projection
public import Storage
public import Telemetry

/// Where pushes go and with which credentials.
public struct PusherConfiguration: Sendable {
    public var developmentURL: String
    public var productionURL: String
    /// Rows claimed per batch.
    public var batchSize: Int
    /// How long a claimed row belongs to this worker before another may take it.
    public var lease: TimeInterval
    public var retryPolicy: RetryPolicy
    public var projection: ProjectionConfiguration

    /// Defaults: Apple's hosts, 500 rows a batch, 30 s lease, `RetryPolicy()`, `ProjectionConfiguration()`.
    public init(
        developmentURL: String = "https://api.sandbox.push.apple.com",
        productionURL: String = "https://api.push.apple.com", batchSize: Int = 500, lease: TimeInterval = 30,
        retryPolicy: RetryPolicy = RetryPolicy(), projection: ProjectionConfiguration = ProjectionConfiguration()
    ) {
        self.developmentURL = developmentURL
        self.productionURL = productionURL
        self.batchSize = batchSize
        self.lease = lease
        self.retryPolicy = retryPolicy
        self.projection = projection
    }
}

/// Drains the outbox into APNs: claims due rows, builds each push from the order's latest state,
/// sends the batch, and applies what APNs answered to the rows, the tokens and the push log.
///
/// - Important: Not `Sendable`: one worker thread owns it (and its `APNsClient`).
public final class PushWorker {
    private let store: any DeliveryStore
    private let sender: any PushSender
    private let tokens: ProviderTokenCache?
    private let configuration: PusherConfiguration
    private let planner: PushPlanner
    private let owner: String
    private let metrics: PushMetrics
    private let logger: Logger
    private var randomness = SystemRandomNumberGenerator()

    /// - Parameters:
    ///   - metrics: where sends, failures and latencies are counted (default: a registry of its own).
    ///   - logger: failures at warning, each accepted push at debug, with the request id behind it.
    public init(
        store: any DeliveryStore, sender: any PushSender, tokens: ProviderTokenCache?,
        configuration: PusherConfiguration,
        owner: String = "pusher-\(getpid())", metrics: PushMetrics = PushMetrics(registry: MetricsRegistry()),
        logger: Logger = Logger(label: "pusher")
    ) {
        self.metrics = metrics
        self.logger = logger
        self.store = store
        self.sender = sender
        self.tokens = tokens
        self.configuration = configuration
        self.planner = PushPlanner(configuration: configuration.projection)
        self.owner = owner
    }

    private struct Planned {
        let item: OutboxItem
        let push: LiveActivityPush
        let environment: PushEnvironment
        let token: String
        let registeredAt: Date
    }

    /// Drains the outbox until the task is cancelled: a batch whenever `signal` fires, and at least
    /// every `idlePoll` for retries that fall due.
    ///
    /// A failed batch is logged through `onError` and retried a second later; its rows come back
    /// when their leases expire, so nothing is lost.
    public func run(
        signal: OutboxSignal, idlePoll: Duration = .seconds(1), onError: @Sendable (any Error) -> Void
    ) async {
        while !Task.isCancelled {
            do {
                if try await runOnce(now: Date()) == 0 { await signal.wait(timeout: idlePoll) }
            } catch {
                onError(error)
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Processes one batch of due rows; returns how many rows it finished or rescheduled.
    /// - Throws: `StorageError` when the database fails (the rows' leases bring them back).
    @discardableResult
    public func runOnce(now: Date) async throws -> Int {
        let items = try store.claimDue(
            owner: owner, now: now, lease: configuration.lease, limit: configuration.batchSize)
        guard !items.isEmpty else { return 0 }
        var planned: [Planned] = []
        for item in items {
            if let push = try plan(item, now: now) { planned.append(push) }
        }
        guard !planned.isEmpty else { return items.count }
        let provider = try await tokens?.token(now: now)
        let requests = planned.map { entry in
            APNsRequest(
                baseURL: entry.environment == .development ? configuration.developmentURL : configuration.productionURL,
                deviceToken: entry.token, topic: entry.push.headers.topic, priority: entry.push.headers.priority,
                expiration: entry.push.headers.expiration, collapseID: entry.push.headers.collapseID,
                payload: entry.push.payload, providerToken: provider?.compact ?? ""
            )
        }
        let responses = sender.send(requests)
        for (entry, response) in zip(planned, responses) {
            try await apply(response, to: entry, provider: provider, now: now)
        }
        return items.count
    }

    /// Builds the push of one row, or finishes the row when there is nothing to send.
    private func plan(_ item: OutboxItem, now: Date) throws -> Planned? {
        guard let order = try store.order(id: item.orderID) else {
            try store.markDead(item.id, reason: "order_missing", now: now)
            return nil
        }
        switch item.target {
        case .activity(let activityID):
            guard let activity = try store.activity(orderID: item.orderID, activityID: activityID),
                activity.endedAt == nil, !activity.pushToken.isEmpty
            else {
                try store.markSent(item.id, now: now)
                return nil
            }
            let context = ActivityContext(
                bundleID: activity.bundleID, startedAt: activity.startedAt, lastSentStatus: activity.lastSentStatus,
                lastSentFingerprint: activity.lastSentFingerprint,
                highPriorityPushesInLastHour: try store.acceptedHighPriorityPushes(
                    orderID: order.id, targetID: activityID, since: now.addingTimeInterval(-3600)
                )
            )
            switch try planner.planUpdate(order: order, activity: context, now: now) {
            case .send(let push):
                return Planned(
                    item: item, push: push, environment: activity.environment, token: activity.pushToken,
                    registeredAt: activity.registeredAt
                )
            case .skip(.activityExpired):
                if try store.endActivity(
                    orderID: order.id, activityID: activityID, reason: "expired", now: now, onlyIfRegisteredBefore: nil)
                {
                    metrics.tokensRemoved.increment(["expired"])
                    metrics.activityEvents.increment(["removed_by_system"])
                }
                try store.markSent(item.id, now: now)
            case .skip:
                try store.markSent(item.id, now: now)
            }
        case .start(let customerID, let deviceID):
            guard let device = try store.pushToStart(customerID: customerID, deviceID: deviceID) else {
                try store.markSent(item.id, now: now)
                return nil
            }
            switch try planner.planStart(order: order, bundleID: device.bundleID, now: now) {
            case .send(let push):
                return Planned(
                    item: item, push: push, environment: device.environment, token: device.pushToken,
                    registeredAt: device.registeredAt
                )
            case .skip:
                try store.markSent(item.id, now: now)
            }
        }
        return nil
    }

    private func apply(_ response: APNsResponse, to entry: Planned, provider: ProviderToken?, now: Date) async throws {
        let item = entry.item
        let event = entry.push.event.rawValue
        try store.logPush(
            PushAttempt(
                orderID: item.orderID, targetID: Self.targetLabel(item.target), event: event,
                priority: entry.push.headers.priority, httpStatus: response.status,
                reason: response.reason?.description ?? response.transportError, apnsID: response.apnsID,
                latencyMilliseconds: Int(response.latencySeconds * 1000), attemptedAt: now, requestID: item.requestID
            )
        )
        metrics.apnsRoundTrip.observe(response.latencySeconds)
        metrics.changeToAnswer.observe(max(0, Date().timeIntervalSince(item.createdAt)))
        let action = PushResultClassifier.action(
            status: response.status, reason: response.reason, timestamp: response.timestamp, environmentConfirmed: true
        )
        let reason = response.reason?.description ?? response.transportError ?? "status \(response.status ?? 0)"
        let fields: [String: Logger.Value] = [
            "request.id": .string(item.requestID ?? "-"), "order.id": .string(item.orderID),
            "push.target": .string(Self.targetLabel(item.target)), "push.event": .string(event),
            "apns.status": .int(response.status ?? 0), "apns.reason": .string(reason),
            "device.token.prefix": .string(String(entry.token.prefix(8))),
        ]
        if case .delivered = action {
            logger.debug("push.accepted", fields)
        } else {
            metrics.failures.increment([
                response.reason?.description
                    ?? (response.status == nil ? "transport" : "status_\(response.status ?? 0)")
            ])
            logger.warning("push.not_accepted", fields)
        }
        switch action {
        case .delivered:
            metrics.pushes.increment([event, "accepted"])
            try store.markSent(item.id, now: now)
            switch (item.target, entry.push.event) {
            case (.start, _): metrics.activityEvents.increment(["started_remotely"])
            case (.activity, .end): metrics.activityEvents.increment(["ended"])
            case (.activity, _): metrics.activityEvents.increment(["updated"])
            }
            if case .activity(let activityID) = item.target {
                try store.recordSent(
                    orderID: item.orderID, activityID: activityID,
                    status: OrderStatus(rawValue: entry.push.contentState.status) ?? .placed,
                    fingerprint: entry.push.fingerprint,
                    timestamp: entry.push.timestamp
                )
                if entry.push.event == .end {
                    try store.endActivity(
                        orderID: item.orderID, activityID: activityID, reason: "ended", now: now,
                        onlyIfRegisteredBefore: nil)
                }
            }
        case .dropToken(let registeredBefore):
            metrics.pushes.increment([event, "token_removed"])
            let removed: Bool
            switch item.target {
            case .activity(let activityID):
                removed = try store.endActivity(
                    orderID: item.orderID, activityID: activityID, reason: reason, now: now,
                    onlyIfRegisteredBefore: registeredBefore
                )
            case .start(let customerID, let deviceID):
                try store.deletePushToStart(
                    customerID: customerID, deviceID: deviceID, onlyIfRegisteredBefore: registeredBefore)
                removed = true
            }
            if removed {
                metrics.tokensRemoved.increment([reason])
                metrics.activityEvents.increment(["removed_by_system"])
            }
            try store.markSent(item.id, now: now)
        case .deadLetter:
            metrics.pushes.increment([event, "dead_lettered"])
            try store.markDead(item.id, reason: reason, now: now)
        case .refreshTokenAndRetry:
            if let tokens, let provider { _ = try await tokens.replaceExpired(provider, now: now) }
            metrics.pushes.increment([event, try retry(item, reason: reason, now: now)])
        case .retry, .pauseEnvironment:
            metrics.pushes.increment([event, try retry(item, reason: reason, now: now)])
        }
    }

    /// Schedules the next attempt, or dead-letters the row past the retry deadline; returns the
    /// result label (`retried` or `dead_lettered`).
    private func retry(_ item: OutboxItem, reason: String, now: Date) throws -> String {
        if configuration.retryPolicy.isExhausted(firstAttempt: item.createdAt, now: now) {
            try store.markDead(item.id, reason: "gave up: \(reason)", now: now)
            return "dead_lettered"
        } else {
            metrics.retries.increment()
            let delay = configuration.retryPolicy.delay(
                afterAttempt: item.attempts, jitter: Double.random(in: 0...1, using: &randomness)
            )
            try store.scheduleRetry(item.id, at: now.addingTimeInterval(delay), error: reason, now: now)
            return "retried"
        }
    }

    static func targetLabel(_ target: OutboxTarget) -> String {
        switch target {
        case .activity(let id): id
        case .start(_, let device): "start:" + device
        }
    }
}
