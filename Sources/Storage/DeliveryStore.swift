public import FoundationEssentials
public import OrderDomain

/// Everything the service asks of its storage; `Database` (SQLite) is the embedded implementation.
///
/// The API and the pusher depend on this protocol, not on SQLite, so that a PostgreSQL-compatible
/// backend (and through it a distributed SQL engine) can be added for deployments that outgrow one
/// machine. Every method is one transaction: it finishes (committed) or throws and leaves nothing.
///
/// Changes of an order go through `write`: the caller locks the order, decides with the domain and
/// records the outcome through a `StoreTransaction`, so a backend stores rows and applies no rule.
/// The contract every backend must keep is `StoreContractTests`, parameterised by backend.
public protocol DeliveryStore: WebhookStore {
    // Orders and their history.
    func order(id: String) throws(StorageError) -> Order?
    func order(id: String, includingItems: Bool) throws(StorageError) -> Order?
    func openOrders(merchantID: String, riderID: String, limit: Int) throws(StorageError) -> [Order]
    func recordRides(_ updates: [RideUpdate], now: Date) throws(StorageError) -> Int
    func trackedOrder(trackingTokenHash: String) throws(StorageError) -> TrackedOrder?
    @discardableResult
    func replaceTrackingToken(orderID: String, hash: String) throws(StorageError) -> Bool
    /// Runs `body` in one write transaction (see `StoreTransaction`); its value comes back once the
    /// transaction committed. What `body` throws comes back as it is; the store's failures are
    /// `StorageError`.
    func write<T>(_ body: (any StoreTransaction) throws -> T) throws -> T
    /// `write` without a thread blocked while the commit waits: `completion` gets the outcome once the
    /// transaction committed or failed (on a thread of the store's).
    /// - Parameter orderID: the order whose `lockOrder` comes first in `body`, when the caller knows
    ///   it before `body` runs. A store that batches writes (PostgreSQL) reads and locks the orders
    ///   of a batch in one statement before its writes run, and `lockOrder` answers from that read.
    ///   So that batches and lone writes take their locks in one order, `body` must lock nothing
    ///   before this order (no idempotency key claimed first), and change an order only after
    ///   locking it.
    func write<T: Sendable>(
        lockingOrder orderID: String?, _ body: @escaping @Sendable (any StoreTransaction) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void)
    func events(orderID: String) throws(StorageError) -> [OrderEvent]
    func orderCountsByStatus() throws(StorageError) -> [OrderStatus: Int]
    func orderIDs(matching text: String, limit: Int) throws(StorageError) -> [String]
    func openOrderCountsByMerchant(limit: Int) throws(StorageError) -> [MerchantOpenOrders]

    // Activities and push-to-start tokens.
    @discardableResult
    func endActivity(orderID: String, activityID: String, reason: String, now: Date, onlyIfRegisteredBefore: Date?)
        throws(StorageError) -> Bool
    func activity(orderID: String, activityID: String) throws(StorageError) -> ActivityRecord?
    func liveActivities(orderID: String) throws(StorageError) -> [ActivityRecord]
    @discardableResult
    func removePushToStart(_ device: DeviceKey, now: Date) throws(StorageError) -> Bool
    func pushToStart(_ device: DeviceKey) throws(StorageError) -> PushToStartRecord?

    // Customer credentials: what a customer's app registers its devices and activities with.
    func createCustomerCredential(_ credential: CustomerCredentialRecord) throws(StorageError)
    func customerCredential(id: String) throws(StorageError) -> CustomerCredentialRecord?
    @discardableResult
    func revokeCustomerCredential(id: String, merchantID: String, customerID: String, now: Date)
        throws(StorageError) -> Bool

    // The outbox and the push log.
    /// The planning read of claimed rows on its own (the push worker reads it with its claim,
    /// `claimBatch`).
    /// - Parameter counted: the activities whose high-priority pushes since `since` are counted
    ///   (a count reads the activity's push log): only those a priority-10 push may go to.
    func pushBatchContext(
        for items: [OutboxItem], highPrioritySince since: Date, countingFor counted: (Order, ActivityRecord) -> Bool
    ) throws(StorageError) -> PushBatchContext
    @discardableResult
    func completePushes(_ completions: [PushCompletion], now: Date) throws(StorageError) -> [Bool]
    func claimDue(owner: String, now: Date, lease: TimeInterval, limit: Int) throws(StorageError) -> [OutboxItem]
    /// `claimDue`, and the `pushBatchContext` of what it claimed read in the same transaction.
    func claimBatch(
        owner: String, now: Date, lease: TimeInterval, limit: Int, highPrioritySince since: Date,
        countingFor counted: (Order, ActivityRecord) -> Bool
    ) throws(StorageError) -> ClaimedBatch
    func extendLeases(owner: String, until: Date) throws(StorageError) -> Int
    func outboxDepth() throws(StorageError) -> (count: Int, oldestDue: Date?)
    func markStalledStarts(sentBefore: Date, now: Date) throws(StorageError) -> [StalledStart]
    func deadLetters(limit: Int) throws(StorageError) -> [DeadLetter]
    func pushLog(orderID: String) throws(StorageError) -> [PushAttempt]
    func recentPushFailures(limit: Int) throws(StorageError) -> [PushAttempt]
    func deadLetterCount() throws(StorageError) -> Int
    func oldestOpenOrders() throws(StorageError) -> [OpenOrderAge]

    // Access: API keys and idempotent replays.
    func createAPIKey(_ key: APIKeyRecord) throws(StorageError)
    func upsertAPIKey(_ key: APIKeyRecord) throws(StorageError)
    func apiKey(id: String) throws(StorageError) -> APIKeyRecord?
    func apiKeys() throws(StorageError) -> [APIKeyRecord]
    func activeAPIKeyCount(role: APIKeyRole) throws(StorageError) -> Int
    @discardableResult
    func revokeAPIKey(id: String, now: Date) throws(StorageError) -> Bool
    func apiKeyGeneration() throws(StorageError) -> Int64
    func idempotentResponse(principal: String, key: String, now: Date) throws(StorageError) -> IdempotentResponse?

    /// Runs `body` unless another node runs the task of this name now; `nil` when it does. For the
    /// periodic work (retention, sweeps) that several nodes on one database need done once at a time.
    /// (SQLite has one node per database: it always runs.)
    func exclusively<T>(_ task: String, _ body: () throws -> T) throws -> T?

    // Maintenance. (What only SQLite has, backups, checkpoints and commit statistics, is on `Database`.)
    func prune(now: Date, policy: RetentionPolicy) throws(StorageError) -> PruneReport
    /// The right to erasure: one merchant's customer's personal data, gone from the store's files.
    func erasePersonalData(merchantID: String, customerID: String, now: Date) throws(StorageError) -> ErasureReport
}

/// Writes of one step, each in a transaction of its own, for callers that have nothing else to write
/// with them.
extension DeliveryStore {
    /// `write` for a body whose only failures are the store's.
    public func writing<T>(_ body: (any StoreTransaction) throws(StorageError) -> T) throws(StorageError) -> T {
        do {
            return try write { transaction in try body(transaction) }
        } catch {
            throw StorageError(error, context: "write failed")
        }
    }

    /// `write(lockingOrder:_:completion:)` for a body that names no order ahead.
    public func write<T: Sendable>(
        _ body: @escaping @Sendable (any StoreTransaction) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        write(lockingOrder: nil, body, completion: completion)
    }

    /// `write` for a task: it is suspended, not blocking its thread, while the commit waits.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreTransaction) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            write(body) { result in continuation.resume(with: result) }
        }
    }

    /// See `StoreTransaction.createOrder`.
    public func createOrder(
        _ order: Order, event: OrderEvent, trackingTokenHash: String?, now: Date, startsAt: Date? = nil,
        requestID: String? = nil
    ) throws(StorageError) -> CreateOrderResult {
        try writing { transaction throws(StorageError) in
            try transaction.createOrder(
                order, event: event, trackingTokenHash: trackingTokenHash, now: now, startsAt: startsAt,
                requestID: requestID)
        }
    }

    /// See `StoreTransaction.registerActivity`; the caller has checked that the order is open.
    public func registerActivity(
        orderID: String, activityID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform = .ios, shown: ShownState?, liveLimit: Int = .max, now: Date, requestID: String? = nil
    ) throws(StorageError) -> ActivityRegistration {
        try writing { transaction throws(StorageError) in
            try transaction.registerActivity(
                orderID: orderID, activityID: activityID, pushToken: pushToken, environment: environment,
                bundleID: bundleID, platform: platform, shown: shown, liveLimit: liveLimit, now: now,
                requestID: requestID)
        }
    }

    /// See `StoreTransaction.registerPushToStart`.
    public func registerPushToStart(
        _ device: DeviceKey, credentialID: String, pushToken: String, environment: PushEnvironment, bundleID: String,
        platform: PushPlatform = .ios, deviceLimit: Int = .max, now: Date
    ) throws(StorageError) {
        try writing { transaction throws(StorageError) in
            try transaction.registerPushToStart(
                device, credentialID: credentialID, pushToken: pushToken, environment: environment,
                bundleID: bundleID, platform: platform, deviceLimit: deviceLimit, now: now)
        }
    }

    /// See `StoreTransaction.replayDeadLetters`.
    public func replayDeadLetters(ids: [Int64]?, now: Date) throws(StorageError) -> Int {
        try writing { transaction throws(StorageError) in try transaction.replayDeadLetters(ids: ids, now: now) }
    }
}
