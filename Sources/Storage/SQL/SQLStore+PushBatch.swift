public import FoundationEssentials
public import OrderDomain

/// An activity of an order, as a dictionary key.
public struct ActivityKey: Hashable, Sendable {
    public let orderID: String
    public let activityID: String

    public init(orderID: String, activityID: String) {
        self.orderID = orderID
        self.activityID = activityID
    }
}

/// A device of one merchant's customer, as a dictionary key.
public struct DeviceKey: Hashable, Sendable {
    public let merchantID: String
    public let customerID: String
    public let deviceID: String

    public init(merchantID: String, customerID: String, deviceID: String) {
        self.merchantID = merchantID
        self.customerID = customerID
        self.deviceID = deviceID
    }
}

/// Everything the pusher reads to plan a claimed batch, read in one transaction.
///
/// - Note: Its orders carry no `items`: the projection never reads them, and decoding them was most
///   of the cost of planning a batch.
public struct PushBatchContext: Sendable {
    public var orders: [String: Order] = [:]
    public var activities: [ActivityKey: ActivityRecord] = [:]
    public var pushToStart: [DeviceKey: PushToStartRecord] = [:]
    /// Priority-10 pushes accepted per activity since the `since` of the read: the hourly budget.
    public var highPriorityPushes: [ActivityKey: Int] = [:]
    /// For an Android activity's FCM token, the newest message any live activity with that token was
    /// sent (one phone following several orders): FCM's limits are the device's, not the order's.
    public var lastSentToToken: [String: Date] = [:]

    public init() {}
}

/// What to write for one finished row of a batch; a batch of them is written in one transaction.
public struct PushCompletion: Sendable {
    public enum RowOutcome: Sendable, Hashable {
        case sent
        case dead(reason: String)
        case retry(at: Date, error: String)
    }

    /// The state an accepted update or end leaves the activity showing.
    public struct SentState: Sendable, Hashable {
        public let status: OrderStatus
        public let fingerprint: String
        public let timestamp: Date

        public init(status: OrderStatus, fingerprint: String, timestamp: Date) {
            self.status = status
            self.fingerprint = fingerprint
            self.timestamp = timestamp
        }
    }

    /// A token to remove: an activity's (ending it) or a device's push-to-start token.
    public enum Removal: Sendable, Hashable {
        case activity(activityID: String, reason: String, onlyIfRegisteredBefore: Date?)
        case pushToStart(merchantID: String, customerID: String, deviceID: String, onlyIfRegisteredBefore: Date?)
    }

    /// An Android device an order's start reached. It becomes an activity of the order, so that the
    /// order's later updates go to the same FCM token: an Android phone registers nothing per order,
    /// where an iPhone must send the update token of the activity the start created.
    public typealias StartedDevice = (activityID: String, pushToken: String, project: String)

    public var item: OutboxItem
    public var outcome: RowOutcome
    public var attempt: PushAttempt?
    /// What the activity shows now; with `startedDevice`, what the start showed.
    public var sentState: SentState?
    public var removal: Removal?
    public var startedDevice: StartedDevice?

    public init(
        item: OutboxItem, outcome: RowOutcome, attempt: PushAttempt? = nil, sentState: SentState? = nil,
        removal: Removal? = nil, startedDevice: StartedDevice? = nil
    ) {
        self.startedDevice = startedDevice
        self.item = item
        self.outcome = outcome
        self.attempt = attempt
        self.sentState = sentState
        self.removal = removal
    }
}

extension SQLStore {
    /// Reads the orders, activities, push-to-start tokens and budget use of a claimed batch at once.
    public func pushBatchContext(for items: [OutboxItem], highPrioritySince since: Date) throws(StorageError)
        -> PushBatchContext
    {
        try readSession { connection in
            var context = PushBatchContext()
            let orderStatement = try connection.cached("SELECT \(StoreSQL.orderColumns) FROM orders WHERE id = ?")
            for orderID in Set(items.map(\.orderID)) {
                if let order = try orderStatement.firstRow(
                    [.text(orderID)], { try StoreSQL.decodeOrder($0, withItems: false) })
                {
                    context.orders[orderID] = order
                }
            }
            for item in items {
                switch item.target {
                case .activity(let activityID):
                    let key = ActivityKey(orderID: item.orderID, activityID: activityID)
                    guard context.activities[key] == nil,
                        let record = try StoreSQL.activity(orderID: item.orderID, activityID: activityID, connection)
                    else { continue }
                    context.activities[key] = record
                    if record.platform == .android, !record.pushToken.isEmpty,
                        context.lastSentToToken[record.pushToken] == nil
                    {
                        context.lastSentToToken[record.pushToken] =
                            try connection.cached(
                                """
                                SELECT max(last_sent_timestamp) AS newest FROM activities
                                WHERE push_token = ? AND platform = 'android' AND ended_at IS NULL
                                """
                            ).firstRow([.text(record.pushToken)]) {
                                try $0.optionalInt("newest").map(Date.init(storageMilliseconds:))
                            } ?? nil
                    }
                    context.highPriorityPushes[key] =
                        try connection.cached(
                            """
                            SELECT count(*) AS accepted FROM push_log WHERE order_id = ? AND target_id = ? AND priority = 10
                                AND http_status = 200 AND attempted_at >= ?
                            """
                        ).firstRow([.text(item.orderID), .text(activityID), .integer(since.storageMilliseconds)]) {
                            Int(try $0.int("accepted"))
                        } ?? 0
                case .start(let customerID, let deviceID):
                    // Devices belong to the order's merchant: another merchant's device never gets its start.
                    guard let merchantID = context.orders[item.orderID]?.merchantID else { continue }
                    let key = DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID)
                    guard context.pushToStart[key] == nil,
                        let record = try StoreSQL.pushToStart(key, connection)
                    else { continue }
                    context.pushToStart[key] = record
                }
            }
            return context
        }
    }

    /// Writes the outcome of a whole batch in one transaction: push log, outbox rows, what each
    /// activity was sent, and removed tokens.
    /// - Returns: for each completion, whether its removal removed a token (a newer registration
    ///   or an earlier removal leaves nothing to remove).
    @discardableResult
    public func completePushes(_ completions: [PushCompletion], now: Date) throws(StorageError) -> [Bool] {
        try writeSQL { connection in
            var removed: [Bool] = []
            removed.reserveCapacity(completions.count)
            for completion in completions {
                if let attempt = completion.attempt { try StoreSQL.insertPushLog(attempt, connection) }
                switch completion.outcome {
                case .sent: try StoreSQL.finish(completion.item.id, state: "sent", error: nil, now: now, connection)
                case .dead(let reason):
                    try StoreSQL.finish(completion.item.id, state: "dead", error: reason, now: now, connection)
                    try StoreSQL.emitDeadLetter(completion.item, reason: reason, now: now, connection)
                case .retry(let at, let error):
                    try StoreSQL.scheduleRetry(completion.item.id, at: at, error: error, now: now, connection)
                }
                if let sent = completion.sentState, case .activity(let activityID) = completion.item.target {
                    try StoreSQL.recordSent(
                        orderID: completion.item.orderID, activityID: activityID, status: sent.status,
                        fingerprint: sent.fingerprint, timestamp: sent.timestamp, connection)
                }
                if let device = completion.startedDevice, let sent = completion.sentState {
                    try StoreSQL.startAndroidActivity(
                        device, orderID: completion.item.orderID, sent: sent, now: now, connection)
                }
                switch completion.removal {
                case .activity(let activityID, let reason, let before)?:
                    removed.append(
                        try StoreSQL.endActivity(
                            orderID: completion.item.orderID, activityID: activityID, reason: reason, now: now,
                            onlyIfRegisteredBefore: before, connection))
                case .pushToStart(let merchantID, let customerID, let deviceID, let before)?:
                    removed.append(
                        try StoreSQL.deletePushToStart(
                            DeviceKey(merchantID: merchantID, customerID: customerID, deviceID: deviceID),
                            onlyIfRegisteredBefore: before, reason: "token_dead", now: now, connection))
                case nil:
                    removed.append(false)
                }
            }
            return removed
        }
    }
}

extension StoreSQL {
    /// Makes the Android device a start reached an activity of the order, showing what the start
    /// carried. One update is queued with it: a change committed while the start was on the wire
    /// queued nothing for this activity, and the planner skips the update if nothing changed.
    static func startAndroidActivity(
        _ device: PushCompletion.StartedDevice, orderID: String, sent: PushCompletion.SentState, now: Date,
        _ connection: any SQLSession
    ) throws {
        try connection.cached(
            """
            INSERT INTO activities (order_id, activity_id, push_token, environment, bundle_id, platform, started_at,
                registered_at, last_sent_status, last_sent_fingerprint, last_sent_timestamp)
            VALUES (?, ?, ?, 'production', ?, 'android', ?, ?, ?, ?, ?)
            ON CONFLICT (order_id, activity_id) DO NOTHING
            """
        ).run([
            .text(orderID), .text(device.activityID), .text(device.pushToken), .text(device.project),
            .integer(now.storageMilliseconds), .integer(now.storageMilliseconds), .text(sent.status.rawValue),
            .text(sent.fingerprint), .integer(sent.timestamp.storageMilliseconds),
        ])
        guard connection.changes > 0 else { return }
        try enqueue(
            orderID: orderID, eventID: nil, target: .activity(activityID: device.activityID), now: now,
            requestID: nil, connection)
        try emitWebhook(
            .activityStarted, orderID: orderID,
            data: [
                ("activityId", .string(device.activityID)), ("environment", .string("production")),
                ("platform", .string("android")),
            ], now: now, connection)
    }
}
