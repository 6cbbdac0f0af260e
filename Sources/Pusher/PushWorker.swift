internal import DeliveryActivityContract
public import Foundation
internal import OrderDomain
public import Projection
public import Storage
import Synchronization
public import Telemetry

/// Where pushes go and with which credentials.
public struct PusherConfiguration: Sendable {
    /// Where pushes to development (sandbox) tokens go: `https://host[:port]`.
    public var developmentURL = "https://api.sandbox.push.apple.com"
    /// Where pushes to production tokens go.
    public var productionURL = "https://api.push.apple.com"
    /// Rows claimed per batch.
    public var batchSize = 500
    /// How long a claimed row belongs to this worker before another may take it.
    public var lease: TimeInterval = 30
    public var retryPolicy = RetryPolicy()
    public var projection = ProjectionConfiguration()
    /// How long an environment is paused after APNs refused our credentials or topic (doubling, up to
    /// `maximumPause`, while it keeps refusing).
    public var firstPause: TimeInterval = 30
    public var maximumPause: TimeInterval = 600

    /// Apple's hosts.
    public init() {}

    /// Both environments at one host: an APNs simulator, a sink, a proxy.
    public init(apnsURL: String) {
        developmentURL = apnsURL
        productionURL = apnsURL
    }
}

/// Drains the outbox into APNs and FCM: claims due rows, builds each push from the order's latest
/// state, sends the batch (iPhones' pushes to APNs, Android phones' messages to FCM), and applies what
/// each service answered to the rows, the tokens and the push log.
///
/// - Important: Not `Sendable`: one worker thread owns it (and its `APNsClient` and `FCMClient`).
public final class PushWorker {
    private let store: any DeliveryStore
    let sender: any PushSender
    /// How Android devices are reached; `nil` when no FCM service account is configured.
    let fcm: FCMRoute?
    /// Firebase projects whose credentials FCM refused: nothing is sent for them meanwhile.
    let projectPauses: FCMProjectPauses
    let tokens: ProviderTokenCache?
    /// Keys of further apps (white-label builds), by bundle id; other apps use `tokens`.
    let appTokens: [String: ProviderTokenCache]
    let configuration: PusherConfiguration
    let planner: PushPlanner
    private let owner: String
    let metrics: PushMetrics
    let logger: Logger
    private var randomness = SystemRandomNumberGenerator()
    /// Writes batch outcomes off the sending thread, so that both cores work: one sends, one writes.
    private let bookkeeping = DispatchQueue(label: "pusher.bookkeeping")
    private let bookkeepingGroup = DispatchGroup()
    private let bookkeepingFailure = FailureBox()
    /// The last batch's outcomes, written once the next batch is claimed (see `runBatch`).
    private var heldCompletions: (completions: [PushCompletion], now: Date)?
    /// Environments whose credentials or topic APNs refused: nothing is sent to them meanwhile.
    let pauses: EnvironmentPauses
    /// Keeps the leases of the rows this worker holds alive while it sends and writes them.
    private let leaseKeeper: LeaseKeeper
    /// Where a batch's FCM requests wait for their answers while its APNs ones do (`FCMFlight`).
    private let fcmQueue = DispatchQueue(label: "pusher.fcm")

    /// - Parameters:
    ///   - tokens: the provider tokens of the default app's key; `nil` with a sender that needs none.
    ///   - appTokens: the keys of further apps by bundle id: each activity is pushed with its app's key.
    ///   - metrics: where sends, failures and latencies are counted (default: a registry of its own).
    ///   - logger: failures at warning, each accepted push at debug, with the request id behind it.
    ///   - owner: this worker's name on the rows it leases; several workers need different ones.
    ///   - pauses: shared by the workers of one process (default: this worker's own).
    ///   - fcm: how Android devices are reached; without it their pushes are dead letters
    ///     (`fcm_not_configured`), replayable once FCM is configured.
    ///   - projectPauses: FCM's pauses, shared by the workers of one process (default: this worker's own).
    public init(
        store: any DeliveryStore, sender: any PushSender, tokens: ProviderTokenCache?,
        appTokens: [String: ProviderTokenCache] = [:], configuration: PusherConfiguration,
        owner: String = "pusher-\(getpid())", metrics: PushMetrics = PushMetrics(registry: MetricsRegistry()),
        logger: Logger = Logger(label: "pusher"), pauses: EnvironmentPauses = EnvironmentPauses(),
        fcm: FCMRoute? = nil, projectPauses: FCMProjectPauses = FCMProjectPauses()
    ) {
        self.fcm = fcm
        self.projectPauses = projectPauses
        self.pauses = pauses
        self.metrics = metrics
        self.logger = logger
        self.store = store
        self.sender = sender
        self.tokens = tokens
        self.appTokens = appTokens
        self.configuration = configuration
        self.planner = PushPlanner(configuration: configuration.projection)
        self.owner = owner
        self.leaseKeeper = LeaseKeeper(store: store, owner: owner, lease: configuration.lease, logger: logger)
    }

    deinit {
        leaseKeeper.stop()
    }

    struct Planned {
        let item: OutboxItem
        let push: LiveActivityPush
        let platform: PushPlatform
        let environment: PushEnvironment
        let token: String
        let registeredAt: Date
        /// The app's bundle id, or for Android its Firebase project.
        let bundleID: String
        let merchantID: String
        /// Whether the push shows a status the device has not shown yet (a start, an end, a new
        /// status): what Android sends at high priority.
        let newStatus: Bool
        /// The order's public attributes, encoded, for an Android message (an iPhone's activity
        /// has them already, or gets them in the start's payload); empty for iPhones.
        let attributes: [UInt8]
    }

    /// What an Android message of `order` names it by, built only for Android devices.
    private func androidAttributes(_ order: Order, _ platform: PushPlatform) -> [UInt8] {
        platform == .android ? planner.projector.encode(planner.projector.attributes(for: order)) : []
    }

    /// Drains the outbox until the task is cancelled: a batch whenever `signal` fires, and at least
    /// every `idlePoll` for retries that fall due.
    ///
    /// A failed batch is logged through `onError` and retried a second later; its rows come back
    /// when their leases expire, so nothing is lost. Cancelling the task stops it after the batch in
    /// hand, with that batch's outcomes written.
    public func run(
        signal: OutboxSignal, idlePoll: Duration = .seconds(1), onError: @Sendable (any Error) -> Void
    ) async {
        var seenNotifications: UInt64 = 0
        while !Task.isCancelled {
            do {
                if try await runBatch(now: Date(), overlapBookkeeping: true) == 0 {
                    try flushBookkeeping()
                    seenNotifications = await signal.wait(after: seenNotifications, timeout: idlePoll)
                }
            } catch {
                // The failed batch's rows are left to their leases, which must now run out.
                leaseKeeper.holding(false)
                onError(error)
                try? await Task.sleep(for: .seconds(1))
            }
        }
        // Stopping: the last batch's outcomes are written before returning.
        do { try flushBookkeeping() } catch { onError(error) }
    }

    /// Processes one batch of due rows; returns how many rows it finished or rescheduled.
    ///
    /// Storage is touched three times per batch, whatever its size: one transaction claims the rows,
    /// one read plans them, one transaction writes every outcome (push log, rows, sent states,
    /// removed tokens). A crash between the send and that last write leaves the rows leased; they
    /// come back when the lease runs out and are sent again (APNs pushes are at-least-once).
    /// - Throws: `StorageError` when the database fails (the rows' leases bring them back).
    @discardableResult
    public func runOnce(now: Date) async throws -> Int {
        do {
            let count = try await runBatch(now: now, overlapBookkeeping: false)
            try flushBookkeeping()
            return count
        } catch {
            leaseKeeper.holding(false)  // the rows come back when their leases run out
            throw error
        }
    }

    /// Writes the outcomes still held back and waits for them; rethrows the failure of the write.
    private func flushBookkeeping() throws {
        if let held = heldCompletions {
            heldCompletions = nil
            try submit(held.completions, now: held.now)
        }
        try finishBookkeeping()
        leaseKeeper.holding(false)
    }

    /// Waits for the last batch's outcomes to be written; rethrows the failure of that write.
    private func finishBookkeeping() throws {
        bookkeepingGroup.wait()
        if let failure = bookkeepingFailure.take() { throw failure }
    }

    /// One batch. With `overlapBookkeeping` its outcomes are held back, and written on the
    /// bookkeeping queue right after the next batch is claimed, while that batch is planned and sent:
    /// the claim never waits behind the write, and the write runs on the other core. The rows stay
    /// leased until written, so the next claim skips their activities. One write is outstanding at most.
    private func runBatch(now: Date, overlapBookkeeping: Bool) async throws -> Int {
        // The batch's orders and activities are read with the claim: the claim's transaction has
        // them at hand (see `claimBatch`).
        let batch = try store.claimBatch(
            owner: owner, now: now, lease: configuration.lease, limit: configuration.batchSize,
            highPrioritySince: now.addingTimeInterval(-3600),
            countingFor: { order, activity in PushPlanner.mayUseHighPriority(order: order, shown: activity.shown) })
        let (items, context) = (batch.items, batch.context)
        if let held = heldCompletions {
            heldCompletions = nil
            try submit(held.completions, now: held.now)
        }
        guard !items.isEmpty else { return 0 }
        leaseKeeper.holding(true)
        var completions: [PushCompletion] = []
        var planned: [Planned] = []
        var androidTokens = Set<String>()
        for item in items {
            switch plan(item, context: context, now: now) {
            case .send(let entry) where entry.platform == .android && !androidTokens.insert(entry.token).inserted:
                // A second order's message to the same phone in this batch: it waits its turn.
                completions.append(
                    PushCompletion(
                        item: entry.item,
                        outcome: .retry(
                            at: now.addingTimeInterval(Self.androidMessageSpacing), error: "fcm_device_spacing")))
            case .send(let entry):
                let pausedUntil =
                    entry.platform == .ios
                    ? pauses.pausedUntil(entry.environment, now: now)
                    : projectPauses.pausedUntil(entry.bundleID, now: now)
                if let until = pausedUntil {
                    completions.append(
                        PushCompletion(
                            item: entry.item,
                            outcome: .retry(
                                at: until, error: entry.platform == .ios ? "environment_paused" : "project_paused")))
                } else {
                    planned.append(entry)
                }
            case .finish(let completion): completions.append(completion)
            }
        }
        let android = planned.filter { $0.platform == .android }
        planned.removeAll { $0.platform == .android }
        let androidBatch = android.isEmpty ? nil : prepareAndroid(android, now: now)
        let androidSentAt = Date()
        // With iPhones in the batch too, the FCM requests go out beside the APNs ones.
        let fcmFlight = androidBatch.flatMap { batch -> FCMFlight? in
            guard let fcm, !batch.requests.isEmpty, !planned.isEmpty else { return nil }
            return FCMFlight(batch.requests, sender: fcm.sender, on: fcmQueue)
        }
        // The flight is waited for even when the APNs side throws: its sender is the worker's.
        var appleFailure: (any Error)?
        do {
            completions += try await sendToApple(planned, now: now)
        } catch {
            appleFailure = error
        }
        if let androidBatch {
            let responses =
                fcmFlight?.wait()
                ?? (androidBatch.requests.isEmpty ? [] : fcm?.sender.send(androidBatch.requests) ?? [])
            completions += finishAndroid(androidBatch, responses: responses, now: now, sentAt: androidSentAt)
        }
        if let appleFailure { throw appleFailure }
        if overlapBookkeeping {
            heldCompletions = (completions, now)
        } else {
            try submit(completions, now: now)
            try finishBookkeeping()
        }
        return items.count
    }

    /// Hands a batch's outcomes to the bookkeeping queue, after the previous write finished.
    private func submit(_ completions: [PushCompletion], now: Date) throws {
        try finishBookkeeping()
        let (store, metrics, failure) = (self.store, self.metrics, self.bookkeepingFailure)
        bookkeepingGroup.enter()
        bookkeeping.async { [bookkeepingGroup] in
            defer { bookkeepingGroup.leave() }
            do {
                let removed = try store.completePushes(completions, now: now)
                Self.countRemovals(completions, removed: removed, metrics: metrics)
            } catch {
                failure.store(error)
            }
        }
    }

    private static func countRemovals(_ completions: [PushCompletion], removed: [Bool], metrics: PushMetrics) {
        for (completion, didRemove) in zip(completions, removed) where didRemove {
            if case .activity(_, let reason, _)? = completion.removal {
                metrics.tokensRemoved.increment([reason == "ended" ? "activity_ended" : reason])
                // The 8 hours iOS gives an activity are apart from a token APNs says is gone.
                if reason == "expired" {
                    metrics.activityEvents.increment(["expired"])
                } else if reason != "ended" {
                    metrics.activityEvents.increment(["removed_by_system"])
                }
            } else {
                metrics.tokensRemoved.increment([completion.attempt?.reason ?? "unknown"])
            }
        }
    }

    private enum PlanResult {
        case send(Planned)
        case finish(PushCompletion)
    }

    /// Builds the push of one row, or the completion of a row with nothing to send.
    private func plan(_ item: OutboxItem, context: PushBatchContext, now: Date) -> PlanResult {
        guard let order = context.orders[item.orderID] else {
            return .finish(PushCompletion(item: item, outcome: .dead(reason: "order_missing")))
        }
        do {
            switch item.target {
            case .activity(let activityID):
                let key = ActivityKey(orderID: item.orderID, activityID: activityID)
                guard let activity = context.activities[key], activity.endedAt == nil, !activity.pushToken.isEmpty
                else { return .finish(PushCompletion(item: item, outcome: .sent)) }
                let activityContext = ActivityContext(
                    bundleID: activity.bundleID, startedAt: activity.startedAt, shown: activity.shown,
                    highPriorityPushesInLastHour: context.highPriorityPushes[key] ?? 0)
                switch try planner.planUpdate(order: order, activity: activityContext, now: now) {
                case .send(let push):
                    if activity.platform == .android,
                        let last = context.lastSentToToken[activity.pushToken] ?? activity.shown?.timestamp,
                        now < last.addingTimeInterval(Self.androidMessageSpacing)
                    {
                        // Too soon for FCM's per-device limits: the row waits, and what changes
                        // meanwhile coalesces into the one message sent then.
                        let next = last.addingTimeInterval(Self.androidMessageSpacing)
                        return .finish(
                            PushCompletion(item: item, outcome: .retry(at: next, error: "fcm_device_spacing")))
                    }
                    return .send(
                        Planned(
                            item: item, push: push, platform: activity.platform, environment: activity.environment,
                            token: activity.pushToken, registeredAt: activity.registeredAt, bundleID: activity.bundleID,
                            merchantID: order.merchantID,
                            newStatus: push.event == .end || activity.shown?.status != push.orderStatus,
                            attributes: androidAttributes(order, activity.platform)))
                case .skip(.activityExpired):
                    return .finish(
                        PushCompletion(
                            item: item, outcome: .sent,
                            removal: .activity(activityID: activityID, reason: "expired", onlyIfRegisteredBefore: nil)))
                case .skip:
                    return .finish(PushCompletion(item: item, outcome: .sent))
                }
            case .start(let customerID, let deviceID):
                let key = DeviceKey(merchantID: order.merchantID, customerID: customerID, deviceID: deviceID)
                guard let device = context.pushToStart[key] else {
                    return .finish(PushCompletion(item: item, outcome: .sent))
                }
                switch try planner.planStart(order: order, bundleID: device.bundleID, now: now) {
                case .send(let push):
                    return .send(
                        Planned(
                            item: item, push: push, platform: device.platform, environment: device.environment,
                            token: device.pushToken, registeredAt: device.registeredAt, bundleID: device.bundleID,
                            merchantID: order.merchantID, newStatus: true,
                            attributes: androidAttributes(order, device.platform)))
                case .skip:
                    return .finish(PushCompletion(item: item, outcome: .sent))
                }
            }
        } catch {
            // A payload over 4 KB is a projection bug: keep the row as a dead letter to look at.
            logger.error("push.payload_too_large", ["order.id": .string(item.orderID)])
            return .finish(PushCompletion(item: item, outcome: .dead(reason: "payload_too_large")))
        }
    }

    /// Counts one answer by merchant and failure reason, and logs it: each accepted push at debug,
    /// each refused one at warning.
    /// - Parameter fields: built only for a line that is logged: an accepted push is logged at
    ///   `debug`, which a service under load does not log.
    func recordAnswer(_ entry: Planned, accepted: Bool, failure: String, fields: () -> [String: Logger.Value]) {
        metrics.changeToAnswer.observe(max(0, Date().timeIntervalSince(entry.item.createdAt)))
        if accepted {
            metrics.merchantPushes.increment([entry.merchantID, "accepted"])
            if logger.minimumLevel <= .debug { logger.debug("push.accepted", fields()) }
        } else {
            metrics.merchantPushes.increment([entry.merchantID, "failed"])
            metrics.failures.increment([entry.platform.rawValue, failure])
            logger.warning("push.not_accepted", fields())
        }
    }

    /// The completion of a push the service accepted: what the activity shows now, and its end.
    /// A start an Android device accepted makes the device an activity of the order.
    func accepted(_ entry: Planned, attempt: PushAttempt) -> PushCompletion {
        var completion = PushCompletion(item: entry.item, outcome: .sent, attempt: attempt)
        let sent = ShownState(
            status: entry.push.orderStatus, fingerprint: entry.push.fingerprint, timestamp: entry.push.timestamp)
        switch (entry.item.target, entry.push.event) {
        case (.start(_, let deviceID), _):
            metrics.activityEvents.increment(["started_remotely"])
            if entry.platform == .android {
                completion.sentState = sent
                completion.startedDevice = (
                    activityID: Self.androidActivityID(deviceID: deviceID), pushToken: entry.token,
                    project: entry.bundleID
                )
            }
        case (.activity(let activityID), .end):
            metrics.activityEvents.increment(["ended"])
            completion.sentState = sent
            completion.removal = .activity(activityID: activityID, reason: "ended", onlyIfRegisteredBefore: nil)
        case (.activity, _):
            metrics.activityEvents.increment(["updated"])
            completion.sentState = sent
        }
        return completion
    }

    /// The completion of a push whose token the service says is dead: the token is removed unless
    /// it was registered again after `registeredBefore`.
    func droppingToken(_ entry: Planned, attempt: PushAttempt, reason: String, registeredBefore: Date?)
        -> PushCompletion
    {
        var completion = PushCompletion(item: entry.item, outcome: .sent, attempt: attempt)
        switch entry.item.target {
        case .activity(let activityID):
            completion.removal = .activity(
                activityID: activityID, reason: reason, onlyIfRegisteredBefore: registeredBefore)
        case .start(let customerID, let deviceID):
            completion.removal = .pushToStart(
                merchantID: entry.merchantID, customerID: customerID, deviceID: deviceID,
                onlyIfRegisteredBefore: registeredBefore)
        }
        return completion
    }

    /// Counts what became of a push: accepted, token removed, retried or dead-lettered.
    func countResult(_ completion: PushCompletion, of entry: Planned) {
        let result: String
        switch completion.outcome {
        case .sent: result = completion.removal != nil && completion.sentState == nil ? "token_removed" : "accepted"
        case .retry: result = "retried"
        case .dead: result = "dead_lettered"
        }
        metrics.pushes.increment([entry.platform.rawValue, entry.push.event.rawValue, result])
    }

    /// The least time between two messages to one Android phone (its FCM token, whichever orders it
    /// follows): FCM allows a device 240 messages a minute and 5,000 an hour; one a second stays
    /// inside both (3,600 an hour).
    static let androidMessageSpacing: TimeInterval = 1

    /// The activity an Android device becomes when an order's start reaches it.
    static func androidActivityID(deviceID: String) -> String { "android:" + deviceID }

    /// Waiting for a paused service: the row comes back when the pause ends, unless its retries ran out.
    func waitOutcome(_ item: OutboxItem, until: Date, reason: String, now: Date) -> PushCompletion.RowOutcome {
        configuration.retryPolicy.isExhausted(firstAttempt: item.createdAt, now: now)
            ? .dead(reason: "gave up: \(reason)") : .retry(at: until, error: reason)
    }

    /// The next attempt's time, or a dead letter past the retry deadline.
    func retryOutcome(_ item: OutboxItem, reason: String, now: Date) -> PushCompletion.RowOutcome {
        if configuration.retryPolicy.isExhausted(firstAttempt: item.createdAt, now: now) {
            return .dead(reason: "gave up: \(reason)")
        }
        metrics.retries.increment()
        let delay = configuration.retryPolicy.delay(
            afterAttempt: item.attempts, jitter: Double.random(in: 0...1, using: &randomness)
        )
        return .retry(at: now.addingTimeInterval(delay), error: reason)
    }

    static func targetLabel(_ target: OutboxTarget) -> String {
        switch target {
        case .activity(let id): id
        case .start(_, let device): "start:" + device
        }
    }
}
