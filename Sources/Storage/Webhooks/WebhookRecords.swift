public import FoundationEssentials

/// What a merchant's systems are told about: the `type` of a webhook event.
public enum WebhookEventType: String, Sendable, Hashable, CaseIterable, Comparable {
    case orderStatusChanged = "order.status_changed"
    case activityStarted = "activity.started"
    case activityEnded = "activity.ended"
    case activityStartStalled = "activity.start_stalled"
    case pushDeadLettered = "push.dead_lettered"
    case pushToStartRemoved = "push_to_start.removed"

    public static func < (left: Self, right: Self) -> Bool { left.rawValue < right.rawValue }
}

/// An endpoint a merchant registered for its events.
public struct WebhookEndpointRecord: Sendable, Hashable {
    public var id: String
    public var merchantID: String
    public var url: String
    public var description: String
    /// The types wanted; empty: every type, those added later included.
    public var eventTypes: [WebhookEventType]
    public var enabled: Bool
    /// Why deliveryd disabled the endpoint (`410 Gone`, failing for days); `nil` when a user did.
    public var disabledReason: String?
    /// The signing secret sealed with the service's sealing key (the database alone cannot sign).
    public var secretSealed: [UInt8]
    /// During a rotation, the previous secret, which signs too until `previousSecretExpiresAt`.
    public var previousSecretSealed: [UInt8]?
    public var previousSecretExpiresAt: Date?
    /// The first failed attempt since the last delivered one.
    public var failingSince: Date?
    public var lastDeliveredAt: Date?
    /// Not sent to before this time: the receiver asked for a pause.
    public var pausedUntil: Date?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: String, merchantID: String, url: String, description: String, eventTypes: [WebhookEventType],
        enabled: Bool, secretSealed: [UInt8], now: Date
    ) {
        self.id = id
        self.merchantID = merchantID
        self.url = url
        self.description = description
        self.eventTypes = eventTypes
        self.enabled = enabled
        self.secretSealed = secretSealed
        self.createdAt = now
        self.updatedAt = now
    }

    /// Whether the endpoint wants events of `type`.
    public func wants(_ type: WebhookEventType) -> Bool { eventTypes.isEmpty || eventTypes.contains(type) }
}

/// One event as stored: its body is sent byte for byte on every attempt.
public struct WebhookEventRecord: Sendable, Hashable {
    public let id: String
    public let merchantID: String
    public let type: WebhookEventType
    public let createdAt: Date
    public let body: [UInt8]
}

/// A delivery claimed for sending, with what the sender needs of its endpoint and event.
public struct WebhookDelivery: Sendable, Hashable {
    public let id: Int64
    public let endpointID: String
    public let eventID: String
    public let eventCreatedAt: Date
    /// Attempts made before this one.
    public let attempts: Int
    public let body: [UInt8]
    public let url: String
    public let secretSealed: [UInt8]
    /// The previous secret while its rotation's grace period lasts, else `nil`.
    public let previousSecretSealed: [UInt8]?
    public let failingSince: Date?
}

/// What to write for one attempt; a round of them is written in one transaction.
public struct WebhookCompletion: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        case delivered
        case retry(at: Date)
        /// Given up: retried for the whole retry period, or the endpoint is gone.
        case failed
    }

    /// What the attempt changes of its endpoint besides its health.
    public enum EndpointChange: Sendable, Hashable {
        case none
        /// The receiver asked for a pause (429, 502, 504 or `Retry-After`).
        case pause(until: Date)
        case disable(reason: String)
    }

    public var delivery: WebhookDelivery
    public var attemptedAt: Date
    /// The receiver's status; `nil` when no answer came.
    public var httpStatus: Int?
    public var error: String?
    public var durationMilliseconds: Int
    public var outcome: Outcome
    public var endpointChange: EndpointChange

    public init(
        delivery: WebhookDelivery, attemptedAt: Date, httpStatus: Int?, error: String?, durationMilliseconds: Int,
        outcome: Outcome, endpointChange: EndpointChange = .none
    ) {
        self.delivery = delivery
        self.attemptedAt = attemptedAt
        self.httpStatus = httpStatus
        self.error = error
        self.durationMilliseconds = durationMilliseconds
        self.outcome = outcome
        self.endpointChange = endpointChange
    }
}

/// One line of an endpoint's delivery log.
public struct WebhookAttempt: Sendable, Hashable {
    public let endpointID: String
    public let eventID: String
    public let eventType: WebhookEventType?
    public let attempt: Int
    public let attemptedAt: Date
    public let httpStatus: Int?
    public let error: String?
    public let durationMilliseconds: Int
}

/// Deliveries by state, for metrics and an endpoint's health.
public struct WebhookQueueCounts: Sendable, Hashable {
    public var pending = 0
    public var sending = 0
    public var delivered = 0
    public var failed = 0
    public var oldestPendingDue: Date?

    public init() {}
}

/// What a replay asks for: one event again, or every event of a time range.
public enum WebhookReplay: Sendable, Hashable {
    case event(id: String)
    case range(from: Date, to: Date)
}

/// What a replay queued, and where a range too long for one replay stops.
public struct WebhookReplayOutcome: Sendable, Hashable {
    public var queued: Int
    /// The time of the first event of the range not looked at (its `since` for the next replay), or
    /// `nil` when the whole range was.
    public var resumeAt: Date?

    public init(queued: Int, resumeAt: Date?) {
        self.queued = queued
        self.resumeAt = resumeAt
    }
}

/// The webhook side of the store: endpoints, the outbox of deliveries, and the delivery log. Events
/// themselves are written by the changes that cause them, in their transactions.
public protocol WebhookStore: Sendable {
    func createWebhookEndpoint(_ endpoint: WebhookEndpointRecord) throws(StorageError)
    func webhookEndpoint(id: String) throws(StorageError) -> WebhookEndpointRecord?
    /// A merchant's endpoints (every merchant's when `merchantID` is `nil`), oldest first.
    func webhookEndpoints(merchantID: String?) throws(StorageError) -> [WebhookEndpointRecord]
    /// Stores an endpoint's new settings; `false` when it is gone.
    @discardableResult
    func updateWebhookEndpoint(_ endpoint: WebhookEndpointRecord) throws(StorageError) -> Bool
    /// Deletes an endpoint with its pending deliveries; `false` when there was none.
    @discardableResult
    func deleteWebhookEndpoint(id: String) throws(StorageError) -> Bool
    /// Queues deliveries to `endpointID` of the events `replay` names that it wants, due now: at most
    /// `limit` events of a range are looked at, so that one request cannot hold the writer for long.
    func replayWebhooks(endpointID: String, _ replay: WebhookReplay, limit: Int, now: Date) throws(StorageError)
        -> WebhookReplayOutcome

    /// Leases up to `limit` due deliveries of enabled, unpaused endpoints, so that no endpoint has
    /// more than `perEndpoint` in flight here, counting those already in flight (`inFlight`, by endpoint).
    func claimWebhookDeliveries(
        owner: String, now: Date, lease: TimeInterval, limit: Int, perEndpoint: Int, inFlight: [String: Int]
    ) throws(StorageError) -> [WebhookDelivery]
    /// Writes a round of attempts: the log, the deliveries' states and the endpoints' health.
    func completeWebhookDeliveries(_ completions: [WebhookCompletion], now: Date) throws(StorageError)
    /// A sender's round in one transaction: writes `completions`, then claims as
    /// `claimWebhookDeliveries` does (nothing when `limit` is 0).
    func exchangeWebhookDeliveries(
        _ completions: [WebhookCompletion], owner: String, now: Date, lease: TimeInterval, limit: Int,
        perEndpoint: Int, inFlight: [String: Int]
    ) throws(StorageError) -> [WebhookDelivery]
    /// The delivery log of an endpoint, newest first.
    func webhookAttempts(endpointID: String, limit: Int) throws(StorageError) -> [WebhookAttempt]
    /// An endpoint's deliveries by state; with `nil`, every endpoint's open ones (pending and
    /// sending: counting the history of every endpoint would read all of it).
    func webhookQueueCounts(endpointID: String?) throws(StorageError) -> WebhookQueueCounts
    /// The stored events of a merchant, newest first.
    func webhookEvents(merchantID: String, limit: Int) throws(StorageError) -> [WebhookEventRecord]
}
