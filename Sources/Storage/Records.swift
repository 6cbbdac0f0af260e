public import FoundationEssentials
public import OrderDomain

/// Which APNs host a token belongs to; a token works only on its own environment's host.
public enum PushEnvironment: String, Sendable, Hashable, CaseIterable {
    case development
    case production
}

/// Which push service reaches a device: APNs for iPhones, FCM for Android phones. An Android
/// record keeps its FCM registration token as `pushToken` and its app's Firebase project as
/// `bundleID`; its `environment` is always `production` (FCM has one).
public enum PushPlatform: String, Sendable, Hashable, CaseIterable {
    case ios
    case android
}

/// What a tracking token says of its order: which one, and whether the token still opens it.
public struct TrackedOrder: Sendable, Hashable {
    public let id: String
    public let status: OrderStatus
    public let updatedAt: Date

    public init(id: String, status: OrderStatus, updatedAt: Date) {
        self.id = id
        self.status = status
        self.updatedAt = updatedAt
    }
}

/// A Live Activity of an order and the state of its push channel.
public struct ActivityRecord: Sendable, Hashable {
    public let orderID: String
    public let activityID: String
    /// Empty once the token was removed (dead, or the activity ended).
    public let pushToken: String
    public let environment: PushEnvironment
    public let bundleID: String
    public let platform: PushPlatform
    public let startedAt: Date
    /// When the current token was registered; a 410 older than this does not remove it.
    public let registeredAt: Date
    public let endedAt: Date?
    public let endedReason: String?
    /// What the activity shows: the last push accepted, or what the app reported; `nil` if neither.
    public let shown: ShownState?
}

/// A push-to-start token of one device of one merchant's customer.
public struct PushToStartRecord: Sendable, Hashable {
    public let merchantID: String
    public let customerID: String
    public let deviceID: String
    /// The customer credential the device registered with; revoking it removes the device.
    public let credentialID: String
    public let pushToken: String
    public let environment: PushEnvironment
    public let bundleID: String
    public let platform: PushPlatform
    public let registeredAt: Date
}

/// A registered activity token and the push it queued.
public struct ActivityRegistration: Sendable, Hashable {
    public let record: ActivityRecord
    /// Whether this registration replaced another token of the same activity.
    public let rotated: Bool
    /// Outbox rows queued (one: the pusher sends the current state unless the activity shows it).
    public let queuedPushes: Int
}

/// A credential a merchant minted for one of its customers' apps: only its SHA-256 is kept.
public struct CustomerCredentialRecord: Sendable, Hashable {
    public let id: String
    public let keyHash: String
    public let merchantID: String
    public let customerID: String
    public let createdAt: Date
    public let revokedAt: Date?

    public init(
        id: String, keyHash: String, merchantID: String, customerID: String, createdAt: Date, revokedAt: Date? = nil
    ) {
        self.id = id
        self.keyHash = keyHash
        self.merchantID = merchantID
        self.customerID = customerID
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// What an outbox row pushes to: a running activity, or a device to start one on.
public enum OutboxTarget: Sendable, Hashable {
    case activity(activityID: String)
    case start(customerID: String, deviceID: String)

    var kind: String {
        switch self {
        case .activity: "activity"
        case .start: "start"
        }
    }

    var targetID: String {
        switch self {
        case .activity(let id): id
        case .start(let customer, let device): customer + "\u{1F}" + device
        }
    }

    init?(kind: String, targetID: String) {
        switch kind {
        case "activity": self = .activity(activityID: targetID)
        case "start":
            let parts = targetID.split(separator: "\u{1F}", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { return nil }
            self = .start(customerID: parts[0], deviceID: parts[1])
        default: return nil
        }
    }
}

/// A claimed outbox row: the pusher owns it until its lease runs out.
public struct OutboxItem: Sendable, Hashable {
    public let id: Int64
    public let orderID: String
    public let eventID: Int64?
    public let target: OutboxTarget
    /// Attempts including the current one.
    public let attempts: Int
    public let dueAt: Date
    public let createdAt: Date
    /// The HTTP request whose change queued this push, for logs.
    public let requestID: String?
}

/// A push-to-start that APNs accepted but whose activity never registered an update token: the
/// activity, if iOS created it, shows the state of its start and will never move.
public struct StalledStart: Sendable, Hashable {
    public let orderID: String
    public let device: DeviceKey
    /// The app the device registered for, if the device is still registered.
    public let bundleID: String?
    public let sentAt: Date
}

/// A dead letter: a push that could not be delivered, with its reason.
public struct DeadLetter: Sendable, Hashable {
    public let id: Int64
    public let orderID: String
    public let target: OutboxTarget
    public let attempts: Int
    public let reason: String
    public let diedAt: Date
    /// The service its device is reached through; `nil` once the device's registration is gone.
    public var platform: PushPlatform?
}

/// One attempt to reach APNs, as the push log keeps it.
public struct PushAttempt: Sendable, Hashable {
    public let orderID: String
    public let targetID: String
    public let event: String
    public let priority: Int
    /// `nil` when the request never got an answer (connection failure, timeout).
    public let httpStatus: Int?
    public let reason: String?
    public let apnsID: String?
    public let latencyMilliseconds: Int?
    public let attemptedAt: Date
    /// The HTTP request whose change caused this push.
    public let requestID: String?
    /// The Live Activity `content-state` the push carried, as JSON: the public projection, what
    /// the phone showed (support staff read it in an order's timeline).
    public let contentState: String?
    /// The service that answered: APNs (`apnsID` is its `apns-id`) or FCM (`apnsID` holds the
    /// message's name).
    public let platform: PushPlatform

    public init(
        orderID: String, targetID: String, event: String, priority: Int, httpStatus: Int?, reason: String?,
        apnsID: String?, latencyMilliseconds: Int?, attemptedAt: Date, requestID: String? = nil,
        contentState: String? = nil, platform: PushPlatform = .ios
    ) {
        self.platform = platform
        self.contentState = contentState
        self.requestID = requestID
        self.orderID = orderID
        self.targetID = targetID
        self.event = event
        self.priority = priority
        self.httpStatus = httpStatus
        self.reason = reason
        self.apnsID = apnsID
        self.latencyMilliseconds = latencyMilliseconds
        self.attemptedAt = attemptedAt
    }
}

/// The result of writing a change: what the domain answered and what was queued.
public struct StoredChange: Sendable, Hashable {
    public let outcome: ChangeOutcome
    /// The `order_events` row id of an applied change, which its pushes carry; `nil` when it queued
    /// none, or where the store does not wait to learn it (PostgreSQL: the pushes name it themselves).
    public let eventID: Int64?
    /// Outbox rows written (one per live activity); `nil` where the store queues them without
    /// counting (PostgreSQL, whose commit wakes every node's pushers: `SQLDialect.countsQueuedPushes`).
    public let queuedPushes: Int?
}

/// The open order that has waited longest in one status: what an operator looks at first.
public struct OpenOrderAge: Sendable, Hashable {
    public let status: OrderStatus
    public let orderID: String
    public let merchantID: String
    public let number: String
    /// When the order entered this status (its last change).
    public let since: Date
    /// Open orders in this status.
    public let count: Int
}

/// How long what is no longer needed is kept. Expired idempotency keys go at once.
public struct RetentionPolicy: Sendable, Hashable {
    public var endedActivities: TimeInterval = 7 * 86_400
    public var pushLog: TimeInterval = 30 * 86_400
    /// Sent and superseded outbox rows.
    public var finishedOutboxRows: TimeInterval = 86_400
    public var deadLetters: TimeInterval = 30 * 86_400
    /// How long after an order ended its customer's personal data is kept (see `ErasedFields`).
    public var personalData: TimeInterval
    /// How long webhook events and the log of their attempts are kept: the window a merchant can
    /// replay from. Events with a delivery still open stay until it finishes.
    public var webhookHistory: TimeInterval = 30 * 86_400

    /// - Parameter personalData: default 30 days after the order ended.
    public init(personalData: TimeInterval = 30 * 86_400) {
        self.personalData = personalData
    }
}

/// Rows removed by one pruning pass.
public struct PruneReport: Sendable, Hashable {
    public var activities = 0
    public var pushLog = 0
    public var outbox = 0
    public var idempotencyKeys = 0
    /// Ended orders whose personal data was erased.
    public var erasedOrders = 0
    public var webhookEvents = 0
    public var webhookAttempts = 0
}

/// What `erasePersonalData(merchantID:customerID:now:)` removed.
public struct ErasureReport: Sendable, Hashable {
    public var orders = 0
    public var devices = 0
    public var activities = 0

    public init(orders: Int = 0, devices: Int = 0, activities: Int = 0) {
        self.orders = orders
        self.devices = devices
        self.activities = activities
    }
}

extension Date {
    /// Milliseconds since 1970, the unit every time column uses.
    var storageMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    init(storageMilliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(storageMilliseconds) / 1000)
    }
}

/// How many open orders one merchant has: the dashboard's per-merchant breakdown.
public struct MerchantOpenOrders: Sendable, Hashable {
    public let merchantID: String
    public let openOrders: Int
}

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
/// - Note: Its orders are read as pushes show them, without `items` and personal data
///   (`StoreSQL.decodeProjectedOrder`): the projection never reads them, and decoding them was most
///   of the cost of planning a batch.
public struct PushBatchContext: Sendable {
    public var orders: [String: Order] = [:]
    public var activities: [ActivityKey: ActivityRecord] = [:]
    public var pushToStart: [DeviceKey: PushToStartRecord] = [:]
    /// Priority-10 pushes accepted per activity since the `since` of the read: the hourly budget.
    /// Only the activities the read was asked to count are in it.
    public var highPriorityPushes: [ActivityKey: Int] = [:]
    /// For an Android activity's FCM token, the newest message any live activity with that token was
    /// sent (one phone following several orders): FCM's limits are the device's, not the order's.
    public var lastSentToToken: [String: Date] = [:]

    public init() {}
}

/// Rows claimed for one push worker's batch, with what planning them needs.
public struct ClaimedBatch: Sendable {
    public var items: [OutboxItem]
    public var context: PushBatchContext

    public init(items: [OutboxItem], context: PushBatchContext) {
        self.items = items
        self.context = context
    }
}

/// What to write for one finished row of a batch; a batch of them is written in one transaction.
public struct PushCompletion: Sendable {
    public enum RowOutcome: Sendable, Hashable {
        case sent
        case dead(reason: String)
        case retry(at: Date, error: String)
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
    public var sentState: ShownState?
    public var removal: Removal?
    public var startedDevice: StartedDevice?

    public init(
        item: OutboxItem, outcome: RowOutcome, attempt: PushAttempt? = nil, sentState: ShownState? = nil,
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

/// What the positions of one ride changed, to store.
public struct RideUpdate: Sendable, Hashable {
    public let orderID: String
    /// The rider whose positions these are: an order given to another rider meanwhile is left alone.
    public let riderID: String
    public let tracking: DeliveryTracking
    /// Whether the customer's activity shows something new: then its live activities get a push.
    public let queuesPushes: Bool

    public init(orderID: String, riderID: String, tracking: DeliveryTracking, queuesPushes: Bool) {
        self.orderID = orderID
        self.riderID = riderID
        self.tracking = tracking
        self.queuesPushes = queuesPushes
    }
}

/// The role an API key grants; merchant and rider keys are bound to one merchant or rider.
public enum APIKeyRole: String, Sendable, Hashable, CaseIterable {
    case merchant
    case rider
    case admin
}

/// A stored API key: only the SHA-256 of the key is kept, never the key itself.
public struct APIKeyRecord: Sendable, Hashable {
    public let id: String
    public let keyHash: String
    public let role: APIKeyRole
    public let merchantID: String?
    public let riderID: String?
    public let createdAt: Date
    public let revokedAt: Date?

    public init(
        id: String, keyHash: String, role: APIKeyRole, merchantID: String?, riderID: String?, createdAt: Date,
        revokedAt: Date? = nil
    ) {
        self.id = id
        self.keyHash = keyHash
        self.role = role
        self.merchantID = merchantID
        self.riderID = riderID
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// What `claimIdempotencyKey` found.
public enum IdempotencyClaim: Sendable, Hashable {
    /// The key is this request's now.
    case claimed
    /// An earlier request holds the key, with its kept response.
    case taken(IdempotentResponse)
}

/// The first response to a write that carried an `Idempotency-Key`, replayed for retries.
public struct IdempotentResponse: Sendable, Hashable {
    /// SHA-256 of the request (method, path, body): a retry must send the same request.
    public let requestHash: String
    public let status: Int
    public let body: [UInt8]

    public init(requestHash: String, status: Int, body: [UInt8]) {
        self.requestHash = requestHash
        self.status = status
        self.body = body
    }
}

/// The answer of `createOrder`: a new order, or the one this merchant already has under that number.
public enum CreateOrderResult: Sendable, Hashable {
    case created(Order, eventID: Int64, queuedStarts: Int)
    case existing(Order)
}

/// A connection pool's state, for `/readyz` and the metrics: a pool always full with callers waiting
/// wants more connections, an unreachable database wants an operator.
public struct ConnectionPoolHealth: Sendable, Hashable {
    public var open: Int
    public var idle: Int
    public var waiting: Int
    /// Whether the last attempt to reach the database succeeded.
    public var reachable: Bool

    package init(open: Int, idle: Int, waiting: Int, reachable: Bool) {
        self.open = open
        self.idle = idle
        self.waiting = waiting
        self.reachable = reachable
    }
}
