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

/// Where an event stands in its merchant's stream: an endpoint reads the events past its cursor in
/// this order, so that an event committed later never comes before one already read. Only the
/// store makes positions (a sender hands back those it was given).
public struct WebhookEventPosition: Sendable, Hashable, Comparable {
    /// The writing transaction on PostgreSQL, whose nodes commit beside each other (an event is read
    /// only once every transaction older than it has ended); always 0 on SQLite, whose one writer
    /// commits in order.
    public let transaction: Int64
    /// The event's number in its merchant's events (SQLite) or in all events (PostgreSQL).
    public let sequence: Int64

    public static func < (left: Self, right: Self) -> Bool {
        (left.transaction, left.sequence) < (right.transaction, right.sequence)
    }
}

/// A delivery claimed for sending, with what the sender needs of its endpoint and event.
public struct WebhookDelivery: Sendable, Hashable {
    /// Where a delivery comes from: its endpoint's stream of new events, or a row of the outbox (a
    /// retry after a failed attempt, or a replay).
    public enum Source: Sendable, Hashable {
        case stream(WebhookEventPosition)
        case row(id: Int64)
    }

    public let source: Source
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

    package init(
        source: Source, endpointID: String, eventID: String, eventCreatedAt: Date, attempts: Int, body: [UInt8],
        url: String, secretSealed: [UInt8], previousSecretSealed: [UInt8]?, failingSince: Date?
    ) {
        self.source = source
        self.endpointID = endpointID
        self.eventID = eventID
        self.eventCreatedAt = eventCreatedAt
        self.attempts = attempts
        self.body = body
        self.url = url
        self.secretSealed = secretSealed
        self.previousSecretSealed = previousSecretSealed
        self.failingSince = failingSince
    }

    /// The outbox row's id; `nil` for a delivery read from the stream.
    public var rowID: Int64? {
        if case .row(let id) = source { id } else { nil }
    }

    /// The event's position, for a delivery read from the stream.
    public var position: WebhookEventPosition? {
        if case .stream(let position) = source { position } else { nil }
    }
}

/// How far a dispatcher got with an endpoint's stream, written with its round.
public struct WebhookStreamProgress: Sendable, Hashable {
    /// Read up to here: the next claim reads after it.
    public var readThrough: WebhookEventPosition
    /// Every event up to here is finished (delivered, or failed and queued as a row): the cursor;
    /// `nil` while none of what was read is.
    public var finishedThrough: WebhookEventPosition?
    /// Whether deliveries of the stream are still held (in flight or queued), so that the lease is kept.
    public var holding: Bool

    public init(readThrough: WebhookEventPosition, finishedThrough: WebhookEventPosition?, holding: Bool) {
        self.readThrough = readThrough
        self.finishedThrough = finishedThrough
        self.holding = holding
    }
}

/// What a round claimed: the deliveries, and how far each endpoint's stream was read.
public struct WebhookClaim: Sendable, Hashable {
    public var deliveries: [WebhookDelivery] = []
    public var readThrough: [String: WebhookEventPosition] = [:]

    public init(deliveries: [WebhookDelivery] = [], readThrough: [String: WebhookEventPosition] = [:]) {
        self.deliveries = deliveries
        self.readThrough = readThrough
    }
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

    /// Claims up to `limit` deliveries of enabled, unpaused endpoints, so that no endpoint has more
    /// than `perEndpoint` held here, counting those already held (`inFlight`, by endpoint): the due
    /// rows of the outbox (retries and replays, each leased to `owner`), then the new events of
    /// endpoints whose stream `owner` holds or can take (a lease on the endpoint), read after its
    /// cursor or, for a stream in `streams`, after what was read already.
    func claimWebhookDeliveries(
        owner: String, now: Date, lease: TimeInterval, limit: Int, perEndpoint: Int, inFlight: [String: Int],
        streams: [String: WebhookStreamProgress]
    ) throws(StorageError) -> WebhookClaim
    /// Writes a round of attempts: the log, the outbox rows' states, a failed stream delivery as a
    /// row to retry, and the endpoints' health.
    func completeWebhookDeliveries(_ completions: [WebhookCompletion], now: Date) throws(StorageError)
    /// A sender's round in one transaction: writes `completions` and the cursors of `streams` (and
    /// keeps the leases of those still holding), then claims as `claimWebhookDeliveries` does
    /// (nothing when `limit` is 0).
    func exchangeWebhookDeliveries(
        _ completions: [WebhookCompletion], owner: String, now: Date, lease: TimeInterval, limit: Int,
        perEndpoint: Int, inFlight: [String: Int], streams: [String: WebhookStreamProgress]
    ) throws(StorageError) -> WebhookClaim
    /// Lets go of every stream lease `owner` holds, so that another sender reads them at once (a
    /// stopping node).
    func releaseWebhookStreams(owner: String) throws(StorageError)
    /// The delivery log of an endpoint, newest first.
    func webhookAttempts(endpointID: String, limit: Int) throws(StorageError) -> [WebhookAttempt]
    /// An endpoint's deliveries by state (pending: the outbox rows waiting and the events of its
    /// stream not finished; delivered: since it was made); with `nil`, every endpoint's open ones
    /// (pending and sending: counting the history of every endpoint would read all of it).
    func webhookQueueCounts(endpointID: String?) throws(StorageError) -> WebhookQueueCounts
    /// The stored events of a merchant, newest first.
    func webhookEvents(merchantID: String, limit: Int) throws(StorageError) -> [WebhookEventRecord]
}
