public import Cryptography
public import FoundationEssentials
public import HTTPServer
import OrderDomain
public import Projection
public import Pusher
public import Storage
public import Telemetry
public import Webhooks

/// What the API needs beyond storage: how to project orders and which app is the default.
public struct DeliveryServiceConfiguration: Sendable {
    public var projection: ProjectionConfiguration = ProjectionConfiguration()
    /// The bundle id an activity or push-to-start registration gets when it names none; `nil`
    /// makes `bundleId` required.
    public var defaultBundleID: String? = nil
    /// How long a response is replayed for its `Idempotency-Key`.
    public var idempotencyLifetime: TimeInterval = 86_400
    /// The apps deliveryd has APNs keys for; a registration naming another app is refused (its pushes
    /// could never be delivered). `nil` accepts any app (the log sender).
    public var knownBundleIDs: Set<String>? = nil
    /// How long after its order was delivered or cancelled a tracking token still opens it.
    public var trackingTokenLifetime: TimeInterval = 7 * 86_400
    public var rateLimits: RateLimits = RateLimits()
    /// The least time between two pushes that a ride's positions cause to one order's activities.
    public var ridePushInterval: TimeInterval = 30
    /// How long a rider's open orders are kept between the rider's posts (`RiderOrdersCache`). A
    /// change through this process forgets them at once, so one process alone on its database keeps
    /// them long; with several nodes, a change through another node is seen only once they expire.
    public var riderOrdersLifetime: TimeInterval = 30
    /// Seconds between two samples of the dashboard's history (see `DashboardHistory`).
    public var historyStep: TimeInterval = 10
    /// The name this process goes by on the dashboard: with several nodes, each keeps its own history.
    public var nodeName: String = "deliveryd"
    /// How old the dashboard's answer may be (see `StatsSnapshots`); zero builds each on its request.
    public var statsMaximumAge: TimeInterval = 0
    /// The database connections' state, for `/readyz` (a PostgreSQL pool; `nil` for SQLite).
    public var databaseHealth: (@Sendable () -> ConnectionPoolHealth)? = nil
    /// How long after APNs accepted a push-to-start its activity must have registered an update
    /// token before the start counts as stalled.
    public var startRegistrationTimeout: TimeInterval = 120
    /// Which URLs a webhook endpoint may have.
    public var webhookPolicy: WebhookURLPolicy = WebhookURLPolicy()
    /// This process's build, shown in the dashboard's header.
    public var build: BuildInfo = BuildInfo(version: "unknown")
    /// The Firebase project deliveryd sends Android messages for (its FCM service account's);
    /// `nil` without FCM: Android devices are then refused, their pushes could never go out.
    public var androidProject: String? = nil

    /// Every other setting at its default: the log sender's open set of apps, no FCM.
    public init(defaultBundleID: String? = nil) {
        self.defaultBundleID = defaultBundleID
    }
}

/// The HTTP face of deliveryd: authentication, decoding, and the routes of `docs/openapi.yaml`.
///
/// Handlers are synchronous and run on the server's handler pool; every write is one storage
/// transaction, answered only after it commits, and wakes the pusher when it queued pushes.
///
/// A class: every handler's closures capture it, and copying a struct of this many references
/// retained each of them (1 % of the CPU of a status change).
public final class DeliveryService: Sendable {
    let store: any DeliveryStore
    let configuration: DeliveryServiceConfiguration
    let projector: LiveActivityProjector
    let outboxSignal: OutboxSignal?
    let idempotency: Idempotency
    /// Seals what the store keeps that must not be readable from the database alone.
    let sealingKey: SealingKey
    let clock: @Sendable () -> Date
    let logger: Logger
    let registry: MetricsRegistry
    let metrics: APIMetrics
    let limiters: Limiters
    /// The dashboard's answers, refreshed off the request path while someone looks.
    let statsSnapshots: StatsSnapshots
    /// API keys as read, until a stored key changes, so that a request does not read its key's row.
    let apiKeys = APIKeyCache()
    /// Riders' open orders, which every position needs.
    let riderOrders: RiderOrdersCache
    /// Riders' positions between two stores of their rides.
    public let rides: RideTracker
    /// The dashboard's curves, sampled by `recordHistorySample`.
    public let history: MetricsHistory
    let sendingStatus: @Sendable (Date) -> PushSendingStatus
    let startedAt: Date

    /// The buckets behind `configuration.rateLimits`.
    struct Limiters: Sendable {
        let failuresByAddress: RateLimiter
        let failuresByKey: RateLimiter
        let requestsByKey: RateLimiter
        let requestsByApp: RateLimiter
        let registrationsByOrder: RateLimiter
    }

    /// - Parameters:
    ///   - sealingKey: seals the kept replies of idempotent requests; keep it outside the database
    ///     and stable across restarts (default: a new key, for tests and throwaway instances).
    ///   - outboxSignal: woken after a commit that queued pushes; `nil` leaves the pusher to its poll.
    ///   - clock: the time of each request (tests pass a fixed one).
    ///   - registry: the process's metrics, served by `/metrics` and `/v1/admin/stats`.
    ///   - logger: where unexpected failures are reported; clients only see `500 internal`.
    ///   - sendingStatus: how pushes leave the process at a time, for the dashboard (default: the log sender).
    public init(
        store: any DeliveryStore, configuration: DeliveryServiceConfiguration = DeliveryServiceConfiguration(),
        sealingKey: SealingKey = .generate(), outboxSignal: OutboxSignal? = nil,
        clock: @escaping @Sendable () -> Date = { Date() },
        registry: MetricsRegistry = MetricsRegistry(), logger: Logger = Logger(label: "api"),
        sendingStatus: @escaping @Sendable (Date) -> PushSendingStatus = { _ in .logSender }
    ) {
        self.history = DashboardHistory.make(step: configuration.historyStep)
        self.statsSnapshots = StatsSnapshots(maximumAge: .milliseconds(Int(configuration.statsMaximumAge * 1000)))
        self.sendingStatus = sendingStatus
        self.startedAt = clock()
        self.store = store
        self.configuration = configuration
        let projector = LiveActivityProjector(configuration: configuration.projection)
        self.projector = projector
        self.outboxSignal = outboxSignal
        self.sealingKey = sealingKey
        self.idempotency = Idempotency(
            store: store, lifetime: configuration.idempotencyLifetime, sealingKey: sealingKey)
        self.clock = clock
        self.registry = registry
        self.logger = logger
        let rides = RideTracker(projector: projector, interval: configuration.ridePushInterval)
        self.rides = rides
        self.riderOrders = RiderOrdersCache(lifetime: configuration.riderOrdersLifetime)
        self.metrics = APIMetrics(registry: registry, store: store, rides: rides)
        let limits = configuration.rateLimits
        self.limiters = Limiters(
            failuresByAddress: RateLimiter(limits.failedAuthenticationsPerAddress),
            failuresByKey: RateLimiter(limits.failedAuthenticationsPerKey),
            requestsByKey: RateLimiter(limits.requestsPerKey), requestsByApp: RateLimiter(limits.requestsPerApp),
            registrationsByOrder: RateLimiter(limits.registrationsPerOrder))
    }

    /// Every route of the service.
    public func router() -> Router {
        var router = Router()
        // Built once: liveness probes are frequent and the answer never changes.
        let healthy = HTTPResponse.json(200, Array(#"{"status":"ok"}"#.utf8))
        router.add("GET", "/healthz", execution: .inline) { _ in healthy }
        let store = self.store
        let databaseHealth = configuration.databaseHealth
        router.add("GET", "/readyz") { _ in
            // A pool that cannot reach its database is not ready, whatever an idle connection says.
            if let health = databaseHealth?(), !health.reachable { return APIError.notReady().response }
            do {
                _ = try store.outboxDepth()
            } catch {
                return APIError.notReady().response
            }
            var body: [String: JSONValue] = ["status": .string("ready")]
            if let health = databaseHealth?() {
                body["database"] = .object([
                    "engine": .string("postgresql"), "busy": .number(Double(health.open - health.idle)),
                    "idle": .number(Double(health.idle)), "waiting": .number(Double(health.waiting)),
                ])
            }
            return .json(200, JSONValue.object(body).encoded)
        }

        route(&router, "POST", "/v1/orders", writing: createOrder)
        route(&router, "GET", "/v1/orders/{id}", showOrder)
        // What merchants and riders post all day: started on the event loop when the key is cached.
        route(
            &router, "POST", "/v1/orders/{id}/status", startsFromMemory: true, locksOrder: true, writing: changeStatus)
        route(
            &router, "PATCH", "/v1/orders/{id}/eta", startsFromMemory: true, locksOrder: true,
            writing: changeEstimatedArrival)
        route(&router, "PUT", "/v1/orders/{id}/rider", startsFromMemory: true, locksOrder: true, writing: assignRider)
        route(&router, "GET", "/v1/orders/{id}/live-activity", showLiveActivity)
        route(&router, "POST", "/v1/orders/{id}/live-activity/start", locksOrder: true, writing: startLiveActivity)
        route(&router, "POST", "/v1/orders/{id}/position", postOrderPosition)
        route(
            &router, "POST", "/v1/riders/{riderId}/position", fromMemory: postRiderPositionFromMemory,
            postRiderPosition)
        route(&router, "POST", "/v1/orders/{id}/tracking-token", reissueTrackingToken)
        route(&router, "GET", "/v1/orders/{id}/pushes", showPushes)
        route(&router, "GET", "/v1/orders/{id}/timeline", showTimeline)
        route(&router, "PUT", "/v1/orders/{id}/activities/{activityId}", locksOrder: true, writing: registerActivity)
        route(&router, "DELETE", "/v1/orders/{id}/activities/{activityId}", endActivity)
        route(
            &router, "PUT", "/v1/customers/{customerId}/push-to-start/{deviceId}", writing: registerPushToStart
        )
        route(&router, "DELETE", "/v1/customers/{customerId}/push-to-start/{deviceId}", removePushToStart)
        route(&router, "POST", "/v1/customers/{customerId}/credentials", createCustomerCredential)
        route(&router, "DELETE", "/v1/customers/{customerId}/credentials/{credentialId}", revokeCustomerCredential)

        route(&router, "POST", "/v1/webhooks", createWebhook)
        route(&router, "GET", "/v1/webhooks", listWebhooks)
        route(&router, "GET", "/v1/webhooks/{id}", showWebhook)
        route(&router, "PATCH", "/v1/webhooks/{id}", updateWebhook)
        route(&router, "DELETE", "/v1/webhooks/{id}", deleteWebhook)
        route(&router, "POST", "/v1/webhooks/{id}/rotate-secret", rotateWebhookSecret)
        route(&router, "GET", "/v1/webhooks/{id}/attempts", listWebhookAttempts)
        route(&router, "POST", "/v1/webhooks/{id}/replay", replayWebhook)

        route(&router, "POST", "/v1/admin/keys", createKey)
        route(&router, "GET", "/v1/admin/keys", listKeys)
        route(&router, "DELETE", "/v1/admin/keys/{id}", revokeKey)
        route(
            &router, "DELETE", "/v1/admin/merchants/{merchantId}/customers/{customerId}/personal-data",
            erasePersonalData)
        route(&router, "GET", "/v1/admin/dead-letters", listDeadLetters)
        route(&router, "POST", "/v1/admin/dead-letters/replay", writing: replayDeadLetters)
        route(&router, "GET", "/metrics", showMetrics)
        route(&router, "GET", "/v1/admin/stats", fromMemory: showStatsFromMemory, showStats)
        route(&router, "GET", "/v1/admin/orders", searchOrders)
        let dashboard = AdminDashboard.response
        router.add("GET", "/admin", execution: .inline) { _ in dashboard }
        return router
    }

    /// One authenticated endpoint: what a handler gets.
    struct Call {
        let request: HTTPRequest
        let caller: Caller
        let now: Date

        func parameter(_ name: String) -> String { request.pathParameters[name] ?? "" }
    }

    /// A write's transaction as its handler prepares it once the request is read, checked and
    /// authorized: it reads and writes through the handle and returns the answer, which commits with
    /// the change (and, with an `Idempotency-Key`, with the key's record).
    typealias TransactionStep = @Sendable (any StoreTransaction) throws -> Written

    /// A write's answer, and what to do once it committed (wake the pusher, count it).
    ///
    /// The answer is built by `respond` after the commit, off the group commit's critical section
    /// (JSON encoding there would serialize every handler's), or inside the transaction when an
    /// `Idempotency-Key` keeps it with the change.
    struct Written: Sendable {
        var respond: @Sendable () -> HTTPResponse
        var afterCommit: @Sendable () -> Void = {}

        init(_ respond: @escaping @Sendable () -> HTTPResponse, afterCommit: @escaping @Sendable () -> Void = {}) {
            self.respond = respond
            self.afterCommit = afterCommit
        }

        /// An answer that is already built (a replay).
        init(built response: HTTPResponse) {
            self.init({ response })
        }
    }

    /// An endpoint whose writes go through `Idempotency` (an `Idempotency-Key` replays them).
    ///
    /// Concurrency: a handler thread reads, checks and authorizes the request and queues its
    /// transaction; it does not wait for the commit. The commit's completion (on the store's thread)
    /// answers, and the answer goes back to the connection's event loop. With `startsFromMemory`
    /// the event loop does the handler thread's part itself whenever it needs only memory: the
    /// caller's API key cached and no `Idempotency-Key` (a replay is read from the store), which is
    /// how merchants and riders post status changes. Only for handlers that read nothing before their
    /// transaction, since the loop must not block. With `locksOrder` the handler's transaction
    /// locks the order of the path's `{id}` before anything else it locks or writes, and the store
    /// may read it ahead with the other writes of its batch (`DeliveryStore.write(lockingOrder:…)`).
    private func route(
        _ router: inout Router, _ method: String, _ pattern: String, startsFromMemory: Bool = false,
        locksOrder: Bool = false, writing handler: @escaping @Sendable (Call) throws -> TransactionStep
    ) {
        let service = self
        let start: Router.DeferredHandler = { request, responder in
            let now = service.clock()
            let caller: Caller
            do {
                caller = try service.authenticate(request, now: now)
            } catch {
                return responder.respond(Self.withCachePolicy(service.errorResponse(to: request, for: error)))
            }
            service.write(
                Call(request: request, caller: caller, now: now), handler, locksOrder: locksOrder, responder: responder)
        }
        guard startsFromMemory else { return router.add(method, pattern, deferred: start) }
        router.add(
            method, pattern,
            deferredFromMemory: { request in
                let now = service.clock()
                guard request.header(Idempotency.headerName) == nil,
                    let caller = service.cachedStaffCaller(request, now: now)
                else { return nil }
                return { responder in
                    do {
                        try service.checkRequestRate(of: caller, now: now)
                    } catch {
                        return responder.respond(Self.withCachePolicy(service.errorResponse(to: request, for: error)))
                    }
                    service.write(
                        Call(request: request, caller: caller, now: now), handler, locksOrder: locksOrder,
                        responder: responder)
                }
            }, deferred: start)
    }

    /// Runs a write's handler under its idempotency key and answers once it committed or failed.
    private func write(
        _ call: Call, _ handler: @escaping @Sendable (Call) throws -> TransactionStep, locksOrder: Bool,
        responder: Responder
    ) {
        let request = call.request
        let answer: @Sendable (HTTPResponse) -> Void = { responder.respond(Self.withCachePolicy($0)) }
        do {
            // Named ahead only when the order is the first lock the write takes: an `Idempotency-Key`
            // is claimed before it, and a batch locking its orders first, beside a write that holds
            // the key and waits for one of them, would deadlock.
            let first = locksOrder && request.header(Idempotency.headerName) == nil ? call.parameter("id") : nil
            try idempotency.perform(
                request, scope: call.caller.idempotencyScope, now: call.now, lockingOrder: first
            ) {
                try handler(call)
            } completion: { [self] result in
                switch result {
                case .success(let written):
                    written.afterCommit()
                    answer(written.respond())
                case .failure(let error):
                    answer(errorResponse(to: request, for: error))
                }
            }
        } catch {
            answer(errorResponse(to: request, for: error))
        }
    }

    /// API answers carry keys, tracking tokens and customers' data: no cache may keep them.
    private static func withCachePolicy(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        if !response.headers.contains(where: { $0.0 == "Cache-Control" }) {
            response.headers.append(("Cache-Control", "no-store"))
        }
        return response
    }

    private func route(
        _ router: inout Router, _ method: String, _ pattern: String,
        _ handler: @escaping @Sendable (Call) throws -> HTTPResponse
    ) {
        let service = self
        router.add(method, pattern) { request in Self.withCachePolicy(service.respond(to: request, handler)) }
    }

    /// An endpoint whose answer may come from memory on the event loop (see `Router.MemoryHandler`):
    /// `fromMemory` returns `nil` when it needs more than memory, and `handler` answers on the pool.
    private func route(
        _ router: inout Router, _ method: String, _ pattern: String,
        fromMemory: @escaping @Sendable (Call) throws -> HTTPResponse?,
        _ handler: @escaping @Sendable (Call) throws -> HTTPResponse
    ) {
        let service = self
        router.add(
            method, pattern,
            fromMemory: { request in
                service.respondFromMemory(to: request, fromMemory).map(Self.withCachePolicy)
            }
        ) { request in Self.withCachePolicy(service.respond(to: request, handler)) }
    }

    /// `respond` on the event loop: `nil` (the pooled handler answers) unless the caller is an API
    /// key the key cache holds, since any other credential is checked against the store, and a
    /// failed one is counted by the pooled path alone.
    private func respondFromMemory(
        to request: HTTPRequest, _ handler: (Call) throws -> HTTPResponse?
    ) -> HTTPResponse? {
        let now = clock()
        guard let caller = cachedStaffCaller(request, now: now) else { return nil }
        do {
            try checkRequestRate(of: caller, now: now)
            return try handler(Call(request: request, caller: caller, now: now))
        } catch {
            return errorResponse(to: request, for: error)
        }
    }

    /// The caller when its credential is an API key the key cache holds; `nil` when checking it
    /// needs the store (any other credential, or a key not kept) or a failure must be counted,
    /// which the pooled path does.
    private func cachedStaffCaller(_ request: HTTPRequest, now: Date) -> Caller? {
        guard request.count(ofHeader: "Authorization") == 1 else { return nil }
        return Credentials.cachedStaff(request.header("Authorization"), apiKeys: apiKeys, now: now)
    }

    /// Authenticates, runs the handler, and turns every failure into its error response.
    private func respond(to request: HTTPRequest, _ handler: (Call) throws -> HTTPResponse) -> HTTPResponse {
        do {
            let now = clock()
            let caller = try authenticate(request, now: now)
            return try handler(Call(request: request, caller: caller, now: now))
        } catch {
            return errorResponse(to: request, for: error)
        }
    }

    /// The error answer to a request that failed; storage and unexpected failures go to the log.
    private func errorResponse(to request: HTTPRequest, for error: any Error) -> HTTPResponse {
        switch error {
        case let error as APIError:
            return error.response
        case let error as StorageError:
            if error.code != .limitReached {
                logger.error(
                    "request.storage_failure",
                    [
                        "request.id": .string(request.requestID), "storage.code": .string(error.code.rawValue),
                        "error": .string(error.description),
                    ])
            }
            return APIError(error).response
        case let error as OrderError:
            return APIError(error).response
        default:
            logger.error(
                "request.unexpected_failure", ["request.id": .string(request.requestID), "error": .string("\(error)")])
            return APIError.internalError().response
        }
    }

    /// The caller, within the rate limits. The credential is always checked first, so a right one
    /// gets in from anywhere (an address behind a carrier NAT or a load balancer is shared by the
    /// innocent): only failures count, per client address and per key id, and past either limit a
    /// failure is answered `429` instead of `401`. Every credential has a request rate.
    private func authenticate(_ request: HTTPRequest, now: Date) throws(APIError) -> Caller {
        let address = request.clientAddress.map { "address:" + $0 }
        // Two credentials in one request: a proxy and a client could each read a different one.
        guard request.count(ofHeader: "Authorization") < 2 else { throw .badRequest("send one Authorization header") }
        let authorization = request.header("Authorization")
        let caller: Caller
        do {
            caller = try Credentials.authenticate(
                authorization, store: store, apiKeys: apiKeys, now: now,
                trackingTokenLifetime: configuration.trackingTokenLifetime)
        } catch  where error.status == 401 {
            // The failure counts against both; past either limit it is answered 429.
            let keyWait = authorization.flatMap(Credentials.keyID(inAuthorization:)).flatMap {
                limiters.failuresByKey.take("key:" + $0, now: now)
            }
            let addressWait = address.flatMap { limiters.failuresByAddress.take($0, now: now) }
            if let keyWait {
                metrics.rateLimited.increment(["failed_authentications_per_key"])
                throw .rateLimited("too many failed authentications for this key id", retryAfter: keyWait)
            }
            if let addressWait {
                metrics.rateLimited.increment(["failed_authentications_per_address"])
                throw .rateLimited("too many failed authentications from this address", retryAfter: addressWait)
            }
            throw error
        }
        try checkRequestRate(of: caller, now: now)
        return caller
    }

    /// Takes one of the credential's requests. - Throws: `429` past its rate.
    private func checkRequestRate(of caller: Caller, now: Date) throws(APIError) {
        let (limiter, label) =
            switch caller {
            case .staff(.merchant, _), .staff(.admin, _): (limiters.requestsByKey, "requests_per_key")
            case .staff(.rider, _), .customer, .customerAccount: (limiters.requestsByApp, "requests_per_app")
            }
        if let wait = limiter.take(caller.idempotencyScope, now: now) {
            metrics.rateLimited.increment([label])
            throw .rateLimited("too many requests with this credential", retryAfter: wait)
        }
    }

    /// The JSON object of a request body.
    /// - Throws: `415` unless the body is declared JSON, `400 invalid_json` unless it is an object.
    func jsonObject(_ request: HTTPRequest) throws(APIError) -> [String: JSONValue] {
        guard let type = request.header("Content-Type"), Self.declaresJSON(type) else {
            throw .unsupportedMediaType()
        }
        return try FieldReader.object(request.body)
    }

    /// Whether a `Content-Type` names `application/json` or an `application/…+json` type, in any
    /// case, whatever its parameters (`; charset=utf-8`). Read as bytes: every write request asks,
    /// and trimming it as `Character`s was 2 % of the process's CPU under load.
    static func declaresJSON(_ contentType: String) -> Bool {
        let spaceOrTab: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
            .drop(while: spaceOrTab).reversed().drop(while: spaceOrTab).reversed()
            .map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }
        let application = Array("application/".utf8)
        let suffix = Array("+json".utf8)
        return mediaType.elementsEqual("application/json".utf8)
            || (mediaType.starts(with: application) && mediaType.count >= application.count + suffix.count
                && mediaType.suffix(suffix.count).elementsEqual(suffix))
    }

    func json(_ status: Int, _ value: JSONValue) -> HTTPResponse {
        .json(status, value.encoded)
    }

    /// Wakes the pusher after a commit that queued pushes.
    func wakePusher(_ queued: Int) {
        if queued > 0 { outboxSignal?.notify() }
    }
}
