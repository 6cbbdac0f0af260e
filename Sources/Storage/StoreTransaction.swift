public import FoundationEssentials
public import OrderDomain

/// One write transaction as its caller sees it: rows and nothing else. The caller reads what it
/// needs (an order, locked until the transaction ends), decides with the pure domain, and writes the
/// outcome through the handle; the store applies no rule of the domain.
///
/// A handle is valid only inside the `DeliveryStore.write` body it was given to. What it writes
/// commits together when the body returns, and not at all when the body throws.
public protocol StoreTransaction {
    /// The order with its private fields (and items), locked against other writers until the
    /// transaction ends; `nil` when there is none. (SQLite: the writer holds the whole database;
    /// PostgreSQL: `SELECT … FOR UPDATE`.)
    func lockOrder(id: String) throws(StorageError) -> Order?

    /// Stores what a change can change of an order (status, the stage it was cancelled at, ETA,
    /// rider) where it differs from `previous`, the order as it was locked, and the time of the
    /// change. Columns left as they were are not written: an indexed one would have its index
    /// entries rewritten all the same (the rider's are in three indexes).
    func updateOrder(_ order: Order, from previous: Order) throws(StorageError)

    /// Appends `event` to its order's history (tagged with the HTTP request behind it). Nothing waits
    /// for its id: the pushes it causes name it as their order's newest event (the order is locked).
    func appendEvent(_ event: OrderEvent, requestID: String?) throws(StorageError)

    /// Queues a push of the order's current state to each of its live activities; pending pushes of
    /// each activity are superseded (they coalesce into this one).
    /// - Parameter carryingLatestEvent: whether the pushes name the order's newest event (appended by
    ///   this transaction) as their cause.
    /// - Returns: how many were queued, and the id of the event they carry (`nil` when none were);
    ///   both `nil` where the store queues them without waiting to learn either (PostgreSQL,
    ///   `SQLDialect.countsQueuedPushes`).
    func queueActivityPushes(orderID: String, carryingLatestEvent: Bool, now: Date, requestID: String?)
        throws(StorageError) -> (count: Int?, eventID: Int64?)

    /// Stores a new order with its `created` event, and queues a `start` push for every push-to-start
    /// device of the merchant's customer, due at `startsAt` (a pre-order's start waits; `nil`: now).
    /// The same merchant and number again returns the stored order and writes nothing (a unique key
    /// on both decides, not a read before the insert).
    func createOrder(
        _ order: Order, event: OrderEvent, trackingTokenHash: String?, now: Date, startsAt: Date?, requestID: String?
    ) throws(StorageError) -> CreateOrderResult

    /// Moves the order's waiting `start` pushes to `time` (not before `now`): a pre-order being
    /// prepared starts at once, a moved ETA moves its start.
    /// - Returns: how many were moved; `nil` where the store moves them without waiting to count
    ///   (PostgreSQL, `SQLDialect.countsQueuedPushes`).
    func scheduleStarts(orderID: String, at time: Date, now: Date) throws(StorageError) -> Int?

    /// Queues a `start` push, due now, for each push-to-start device of the order's customer that has
    /// not been sent this order's start yet (a waiting one is replaced by one due now).
    /// - Returns: how many were queued.
    func startNow(_ order: Order, now: Date, requestID: String?) throws(StorageError) -> Int

    /// Registers an activity's push token of an order the caller locked and found open; a new token
    /// for the same activity replaces the old one.
    ///
    /// A re-registration keeps the activity's start time (its 8-hour lifetime runs from the first one)
    /// and stamps `registeredAt`, so that an older 410 cannot remove the new token. Every registration
    /// queues one push: the pusher sends the order's current state unless it equals what the activity
    /// shows (`shown`, or what was last sent to it), so a status that changed between a push-to-start
    /// and the app's registration reaches the phone at once.
    /// - Parameters:
    ///   - shown: what the app says the activity shows now; `nil` keeps what was last sent (nothing,
    ///     for a new activity: its first push then carries the current state).
    ///   - liveLimit: live activities the order may have; a new one past it throws `limitReached`
    ///     (the order's lock serializes registrations of one order, so the count holds).
    func registerActivity(
        orderID: String, activityID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform, shown: ShownState?, liveLimit: Int, now: Date, requestID: String?
    ) throws(StorageError) -> ActivityRegistration

    /// Stores a device's push-to-start token under its merchant and customer; a new token for the same
    /// device replaces the old one (and the credential it came with). The latest registration of a
    /// token for an app wins: every other registration of it (another customer who used the phone
    /// before, of this merchant or another) is removed, so no one else's order starts on that phone.
    /// - Parameter deviceLimit: devices the customer may have; a new one past it throws `limitReached`.
    func registerPushToStart(
        _ device: DeviceKey, credentialID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform, deviceLimit: Int, now: Date
    ) throws(StorageError)

    /// Queues `order.status_changed` to the merchant's webhook endpoints for an applied change that
    /// moved the order's status (other changes tell the merchant nothing it did not do itself).
    func queueStatusWebhook(order: Order, event: OrderEvent, now: Date) throws(StorageError)

    /// Puts dead letters back in the queue (all of them when `ids` is `nil`); returns how many.
    func replayDeadLetters(ids: [Int64]?, now: Date) throws(StorageError) -> Int

    /// Takes an idempotency key for the request about to run in this transaction, or returns the
    /// record that holds it. The guard is the table's primary key, not state in one process: a
    /// conditional insert that only an expired record gives way to, so two requests with one key, on
    /// one node or two, are serialized by the database and the second replays the first. A body that
    /// throws rolls the claim back with its change.
    func claimIdempotencyKey(principal: String, key: String, requestHash: String, expiresAt: Date, now: Date)
        throws(StorageError) -> IdempotencyClaim

    /// Keeps the response of the request that claimed `key`, committed with its change.
    func saveIdempotentResponse(principal: String, key: String, response: IdempotentResponse) throws(StorageError)

    /// Gives up a claimed key without a response to keep (the request was refused): a retry runs anew.
    func releaseIdempotencyKey(principal: String, key: String) throws(StorageError)
}

extension StoreTransaction {
    /// Writes what the domain decided about an order, `previous` as `lockOrder` read it: for
    /// `applied`, the order row, its event, and a push to each live activity; `unchanged` writes
    /// nothing.
    public func record(_ outcome: ChangeOutcome, of previous: Order, now: Date, requestID: String?)
        throws(StorageError) -> StoredChange
    {
        guard case .applied(let order, let event) = outcome else {
            return StoredChange(outcome: outcome, eventID: nil, queuedPushes: 0)
        }
        try updateOrder(order, from: previous)
        try appendEvent(event, requestID: requestID)
        let queued = try queueActivityPushes(
            orderID: order.id, carryingLatestEvent: true, now: now, requestID: requestID)
        if event.kind == .statusChanged { try queueStatusWebhook(order: order, event: event, now: now) }
        return StoredChange(outcome: outcome, eventID: queued.eventID, queuedPushes: queued.count)
    }
}
