internal import CLinuxShim
public import Cryptography
internal import Dispatch
public import Foundation
public import Lifecycle
public import Storage
internal import Synchronization
public import Telemetry

#if canImport(Glibc)
    import Glibc
#endif

/// How webhooks are sent.
public struct WebhookDispatcherConfiguration: Sendable {
    /// Which URLs may be reached: https only and no private networks unless the policy says.
    public var policy: WebhookURLPolicy
    /// One attempt's limit, connection included.
    public var timeoutSeconds: Double = 10
    public var retrySchedule = WebhookRetrySchedule.standard
    /// Attempts in flight at once, over all endpoints.
    public var maximumInFlight = 256
    /// Attempts in flight at once to one endpoint: a slow one holds this many, never the others'.
    public var perEndpoint = 32
    /// How often the outbox is read for due deliveries when nothing else wakes the dispatcher.
    public var pollInterval = 0.5
    /// An endpoint that delivered nothing for this long is disabled (and says so): 5 days.
    public var disableAfter: TimeInterval = 5 * 86_400
    /// The longest pause a receiver's `Retry-After` can ask for.
    public var maximumPause: TimeInterval = 3_600
    /// CA bundle to trust; `nil` for the system's.
    public var caFile: String? = nil
    /// The dispatcher thread's niceness (0 to 19). Webhooks are the one job that may wait: when the
    /// cores are busy, the request path, the writer and the pushers go first, and the dispatcher
    /// catches up on what is left of the CPU (its queue is durable).
    public var threadNiceness: Int32 = 10

    public init(policy: WebhookURLPolicy = WebhookURLPolicy()) {
        self.policy = policy
    }
}

/// Sends the webhook outbox: claims due deliveries, signs and POSTs each, and writes what came of
/// them, a round at a time.
///
/// Concurrency: one thread of its own, which owns the libcurl multi handle and runs every transfer
/// on it without blocking on any one; it shares nothing with the push workers (no thread, no
/// connection, no lock), so a receiver that hangs can never delay a push to APNs. It runs niced
/// (`threadNiceness`), and hands its store calls to a `StoreCallThread` at the process's priority.
/// Other threads only ask it to stop.
public final class WebhookDispatcher: Sendable {
    private let store: any WebhookStore
    private let sealingKey: SealingKey
    private let configuration: WebhookDispatcherConfiguration
    private let owner: String
    private let metrics: WebhookMetrics
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let stopAsked = ShutdownLatch()

    public init(
        store: any WebhookStore, sealingKey: SealingKey, configuration: WebhookDispatcherConfiguration,
        owner: String, registry: MetricsRegistry, logger: Logger, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.sealingKey = sealingKey
        self.configuration = configuration
        self.owner = owner
        self.metrics = WebhookMetrics(registry: registry, store: store)
        self.logger = logger
        self.clock = clock
    }

    /// Starts the dispatcher's thread.
    /// - Throws: `WebhookError` when libcurl cannot make its multi handle.
    public func start() throws(WebhookError) {
        let transport = try WebhookTransport(
            policy: configuration.policy, timeoutMilliseconds: Int(configuration.timeoutSeconds * 1000),
            caFile: configuration.caFile, idleLimit: configuration.maximumInFlight)
        let box = TransportBox(transport)
        // Made here, so that its thread has this thread's priority, not the dispatcher's.
        let storeCalls = StoreCallThread(name: "webhooks-store")
        let thread = Thread { [self] in
            if configuration.threadNiceness > 0, clinux_set_thread_niceness(configuration.threadNiceness) != 0 {
                logger.warning("webhook.niceness_not_set", ["errno": .string(String(errno))])
            }
            run(box.take(), storeCalls: storeCalls)
            storeCalls.close()
            finished.signal()
        }
        thread.name = "webhooks"
        thread.start()
    }

    /// How long a stop waits for the attempts in flight: a receiver that hangs must not hold up a
    /// restart for the whole attempt timeout.
    public static let stopGrace: Double = 5

    /// Stops claiming, lets the attempts in flight finish (for at most `stopGrace` seconds) and
    /// writes their outcome. What is still leased then is sent again once its lease runs out.
    /// - Returns: whether it stopped within `timeout`.
    @discardableResult
    public func stop(timeout: Double) -> Bool {
        stopping.store(true, ordering: .releasing)
        return finished.wait(timeout: .now() + timeout) == .success
    }

    private func run(_ transport: WebhookTransport, storeCalls: StoreCallThread) {
        let sender = AttemptSender(
            transport: transport, signer: WebhookSigner(sealingKey: sealingKey), storeCalls: storeCalls)
        var held = HeldDeliveries(
            perEndpoint: configuration.perEndpoint, maximumInFlight: configuration.maximumInFlight)
        // Outcomes not written yet: a round writes them together, in one transaction.
        var answered: [WebhookCompletion] = []
        var nextClaim = Date.distantPast
        var lastRound = Date.distantPast
        var stopDeadline: Date?
        // A queued delivery waits at most one attempt's timeout for a slot (every attempt ahead of it
        // ends within that), then its own attempt takes at most another, and its round writes it.
        let lease = 2 * configuration.timeoutSeconds + 10
        while true {
            let now = clock()
            let isStopping = stopping.load(ordering: .acquiring)
            if isStopping, stopDeadline == nil {
                stopDeadline = now.addingTimeInterval(min(configuration.timeoutSeconds, Self.stopGrace))
            }
            let finished = isStopping && (held.inFlight.isEmpty || now > stopDeadline ?? now)
            // One round, one transaction: the outcomes gathered since the last round and the next
            // claim, at most one round per `roundInterval`, so that however fast receivers answer,
            // webhooks add at most that many commits a second beside the status changes.
            let wantsClaim = !isStopping && now >= nextClaim && held.count < held.capacity
            let roundDue =
                finished
                || ((!answered.isEmpty || wantsClaim) && now.timeIntervalSince(lastRound) >= Self.roundInterval)
            if roundDue {
                lastRound = now
                nextClaim =
                    round(
                        &answered, claiming: wantsClaim ? held.capacity - held.count : 0, into: &held, now: now,
                        lease: lease, on: sender) ?? nextClaim
            }
            if finished {
                // Another node may read the streams at once rather than after the lease.
                do {
                    try storeCalls.run { [store, owner] () throws(StorageError) in
                        try store.releaseWebhookStreams(owner: owner)
                    }
                } catch {
                    logger.warning("webhook.release_failed", ["error": .string("\(error)")])
                }
                return
            }
            let untilRound = Self.roundInterval - now.timeIntervalSince(lastRound)
            let wait =
                held.inFlight.isEmpty && answered.isEmpty
                ? min(configuration.pollInterval, nextClaim.timeIntervalSince(now))
                : untilRound > 0 ? untilRound : Self.roundInterval
            let answers = transport.poll(waitMilliseconds: max(1, Int(wait * 1000)))
            guard !answers.isEmpty else { continue }
            let answeredAt = clock()
            for (tag, answer) in answers {
                if let delivery = held.finish(tag: tag) {
                    let completion = complete(delivery, answer, at: answeredAt)
                    if completion.endpointChange != .none {
                        // Paused or disabled: what waits for it is claimed again when it may be sent.
                        held.dropQueued(endpointID: delivery.endpointID)
                    }
                    answered.append(completion)
                }
            }
            // Freed slots take what waits for them now, not at the next round.
            if !isStopping { startQueued(&held, &answered, now: answeredAt, on: sender) }
            // Answers free room: more may be due at once.
            nextClaim = min(nextClaim, answeredAt)
        }
    }

    /// Starts the queued deliveries their endpoints and the dispatcher have room for. One queued
    /// longer than an attempt's timeout is left to its lease (claimed again once it runs out), so
    /// that no attempt outlives the lease that keeps it to this dispatcher.
    private func startQueued(
        _ held: inout HeldDeliveries, _ answered: inout [WebhookCompletion], now: Date, on sender: AttemptSender
    ) {
        while let next = held.nextToStart() {
            // A stream's lease is kept by every round while it holds anything; a row's is not.
            if next.delivery.rowID != nil, now.timeIntervalSince(next.queuedAt) > configuration.timeoutSeconds + 5 {
                continue
            }
            if let refusal = send(next.delivery, tag: next.tag, now: now, on: sender) {
                // Written with the next round's outcomes.
                held.finishUnsent(next)
                answered.append(complete(next.delivery, refusal, at: now))
            } else {
                held.started(next)
            }
        }
    }

    /// The least time between two rounds.
    static let roundInterval: TimeInterval = 0.02

    /// Writes the outcomes gathered since the last round and claims up to `room` due deliveries,
    /// in one transaction, then starts what it claimed as far as there are slots.
    /// - Returns: when to claim next (now if the claim got some, else after a poll interval); `nil`
    ///   when nothing was asked.
    private func round(
        _ answered: inout [WebhookCompletion], claiming room: Int, into held: inout HeldDeliveries, now: Date,
        lease: TimeInterval, on sender: AttemptSender
    ) -> Date? {
        let written = answered
        answered.removeAll(keepingCapacity: true)
        let progress = held.streamProgress
        do {
            let (perEndpoint, inFlight) = (held.perEndpointCapacity, held.byEndpoint)
            let claim = try sender.storeCalls.run { [store, owner] () throws(StorageError) in
                try store.exchangeWebhookDeliveries(
                    written, owner: owner, now: now, lease: lease, limit: room, perEndpoint: perEndpoint,
                    inFlight: inFlight, streams: progress)
            }
            report(written)
            held.recorded(progress)
            held.queue(claim, at: now)
            startQueued(&held, &answered, now: now, on: sender)
            guard room > 0 else { return nil }
            return claim.deliveries.isEmpty ? now.addingTimeInterval(configuration.pollInterval) : now
        } catch {
            // The outcomes of rows are lost with the transaction: their leases run out and they are
            // sent again, so a receiver may see one twice, never none. A stream's are written with
            // the next round, before its cursor can move past them.
            logger.error("webhook.round_failed", ["error": .string("\(error)")])
            report(written.filter { $0.delivery.rowID != nil })
            answered += written.filter { $0.delivery.rowID == nil }
            return room > 0 ? now.addingTimeInterval(configuration.pollInterval) : nil
        }
    }

    /// Signs and starts one attempt.
    /// - Returns: `nil` once started; else why it could not start, an answer like any other (a
    ///   secret the sealing key cannot open, a URL libcurl refuses), so the delivery is retried and logged.
    private func send(_ delivery: WebhookDelivery, tag: Int64, now: Date, on sender: AttemptSender)
        -> WebhookAnswer?
    {
        do {
            let headers = try sender.signer.headers(for: delivery, attemptedAt: now)
            try sender.transport.start(tag: tag, url: delivery.url, headers: headers, body: delivery.body)
            return nil
        } catch {
            logger.error(
                "webhook.send_failed",
                ["webhook.endpoint": .string(delivery.endpointID), "error": .string("\(error)")])
            return WebhookAnswer(status: nil, retryAfterSeconds: nil, error: "\(error)", durationMilliseconds: 0)
        }
    }

    /// What to write for an answer: delivered, tried again later, or given up; and what it says of
    /// the endpoint.
    func complete(_ delivery: WebhookDelivery, _ answer: WebhookAnswer, at now: Date) -> WebhookCompletion {
        var completion = WebhookCompletion(
            delivery: delivery, attemptedAt: now, httpStatus: answer.status, error: answer.error,
            durationMilliseconds: answer.durationMilliseconds, outcome: .delivered)
        if let status = answer.status, (200..<300).contains(status) { return completion }
        if answer.status == 410 {
            completion.outcome = .failed
            completion.endpointChange = .disable(reason: "the receiver answered 410 Gone")
            return completion
        }
        let attempts = delivery.attempts + 1
        var next = configuration.retrySchedule.nextAttempt(
            afterFailed: attempts, now: now, jitter: Double.random(in: -1...1))
        if answer.retryAfterSeconds != nil || [429, 502, 504].contains(answer.status ?? 0) {
            let asked = answer.retryAfterSeconds.map(Double.init) ?? next?.timeIntervalSince(now) ?? 60
            let until = now.addingTimeInterval(min(max(asked, 1), configuration.maximumPause))
            completion.endpointChange = .pause(until: until)
            next = next.map { max($0, until) }
        }
        completion.outcome = next.map { .retry(at: $0) } ?? .failed
        if let since = delivery.failingSince, now.timeIntervalSince(since) >= configuration.disableAfter {
            let days = Int(now.timeIntervalSince(since) / 86_400)
            completion.endpointChange = .disable(reason: "failing for \(days) days: nothing delivered since then")
        }
        return completion
    }

    private func report(_ completions: [WebhookCompletion]) {
        for completion in completions {
            let result: String =
                switch completion.outcome {
                case .delivered: "delivered"
                case .retry: "retry"
                case .failed: "failed"
                }
            metrics.attempts.increment([result])
            metrics.duration.observe(Double(completion.durationMilliseconds) / 1000)
            if result != "delivered" {
                logger.info(
                    "webhook.attempt_failed",
                    [
                        "webhook.endpoint": .string(completion.delivery.endpointID),
                        "webhook.event": .string(completion.delivery.eventID),
                        "webhook.attempt": .int(completion.delivery.attempts + 1),
                        "http.response.status_code": completion.httpStatus.map { .int($0) } ?? .string("none"),
                        "error": .string(completion.error ?? ""), "webhook.outcome": .string(result),
                    ])
            }
            if case .disable(let reason) = completion.endpointChange {
                metrics.endpointsDisabled.increment()
                logger.warning(
                    "webhook.endpoint_disabled",
                    ["webhook.endpoint": .string(completion.delivery.endpointID), "reason": .string(reason)])
            }
        }
    }
}

/// The deliveries a dispatcher holds: attempts on the wire, at most `perEndpoint` to an endpoint and
/// `maximumInFlight` in all, and up to `readAhead` times as many held in all, those not on the wire
/// waiting in their endpoint's queue for a slot. Without the queue a slot freed by an answer stayed empty until the next round, which held
/// one endpoint to `perEndpoint` attempts a round (1,600 a second at 32 and 20 ms).
///
/// It also keeps, for each endpoint's stream it reads, how far it read and how far every event is
/// finished: answers come back in any order, and the cursor written moves only past a run of
/// finished events, so that a stop or a crash sends again what was not finished, never skips it.
struct HeldDeliveries {
    /// A delivery held here, with the tag its transfer is known by.
    struct Held {
        let tag: Int64
        let delivery: WebhookDelivery
        let queuedAt: Date
    }

    /// What is held of one endpoint's stream.
    struct Stream {
        var readThrough: WebhookEventPosition
        /// The held deliveries of the stream, in order, and whether each is finished.
        var held: [(position: WebhookEventPosition, finished: Bool)] = []
        var finishedThrough: WebhookEventPosition?
        /// The cursor last written.
        var written: WebhookEventPosition?
    }

    let perEndpoint: Int
    let maximumInFlight: Int
    private(set) var inFlight: [Int64: Held] = [:]
    private var inFlightByEndpoint: [String: Int] = [:]
    private var queued: [String: FIFO<Held>] = [:]
    private var queuedCount = 0
    private var nextTag: Int64 = 1
    private(set) var streams: [String: Stream] = [:]

    init(perEndpoint: Int, maximumInFlight: Int) {
        self.perEndpoint = perEndpoint
        self.maximumInFlight = maximumInFlight
    }

    /// How many times its slots a dispatcher holds, in flight and claimed ahead. A round is a
    /// transaction that waits its turn at the writer (tens of ms under load), so an endpoint gets at
    /// most what it holds per round: at twice its 32 slots a busy endpoint fell behind its events.
    static let readAhead = 8

    /// Held at most: in flight and claimed ahead.
    var capacity: Int { Self.readAhead * maximumInFlight }
    /// What the claim may hold for one endpoint, in flight and queued.
    var perEndpointCapacity: Int { Self.readAhead * perEndpoint }
    var count: Int { inFlight.count + queuedCount }

    /// Held by endpoint, in flight or queued: what the claim counts against `perEndpointCapacity`.
    var byEndpoint: [String: Int] {
        var counts = inFlightByEndpoint
        for (endpointID, waiting) in queued { counts[endpointID, default: 0] += waiting.count }
        return counts
    }

    /// What a round writes of the streams: those whose cursor moved on or that still hold deliveries.
    var streamProgress: [String: WebhookStreamProgress] {
        var progress: [String: WebhookStreamProgress] = [:]
        for (endpointID, stream) in streams where stream.finishedThrough != stream.written || !stream.held.isEmpty {
            progress[endpointID] = WebhookStreamProgress(
                readThrough: stream.readThrough, finishedThrough: stream.finishedThrough,
                holding: !stream.held.isEmpty)
        }
        return progress
    }

    /// The round wrote `progress`: a stream with nothing held whose cursor is written is let go (the
    /// next claim reads after its cursor, which is where it got to).
    mutating func recorded(_ progress: [String: WebhookStreamProgress]) {
        for (endpointID, written) in progress {
            streams[endpointID]?.written = written.finishedThrough
            if let stream = streams[endpointID], stream.held.isEmpty, stream.written == stream.readThrough {
                streams[endpointID] = nil
            }
        }
    }

    mutating func queue(_ claim: WebhookClaim, at now: Date) {
        for (endpointID, readThrough) in claim.readThrough {
            streams[endpointID, default: Stream(readThrough: readThrough)].readThrough = readThrough
        }
        for delivery in claim.deliveries {
            if let position = delivery.position {
                streams[delivery.endpointID]?.held.append((position, false))
            }
            queued[delivery.endpointID, default: FIFO()].append(Held(tag: nextTag, delivery: delivery, queuedAt: now))
            nextTag += 1
            queuedCount += 1
        }
        // A stream read past events its endpoint does not want, with nothing else held, is finished.
        for endpointID in claim.readThrough.keys { settle(endpointID) }
    }

    /// The longest-waiting queued delivery of an endpoint with a free slot, taken off its queue.
    mutating func nextToStart() -> Held? {
        guard inFlight.count < maximumInFlight,
            let endpointID = queued.keys.first(where: { inFlightByEndpoint[$0, default: 0] < perEndpoint }),
            let first = queued[endpointID]?.popFirst()
        else { return nil }
        if queued[endpointID]?.isEmpty == true { queued[endpointID] = nil }
        queuedCount -= 1
        return first
    }

    mutating func started(_ held: Held) {
        inFlight[held.tag] = held
        inFlightByEndpoint[held.delivery.endpointID, default: 0] += 1
    }

    /// The attempt tagged `tag` ended; its delivery, if it was in flight here.
    mutating func finish(tag: Int64) -> WebhookDelivery? {
        guard let held = inFlight.removeValue(forKey: tag) else { return nil }
        let delivery = held.delivery
        let remaining = inFlightByEndpoint[delivery.endpointID, default: 1] - 1
        inFlightByEndpoint[delivery.endpointID] = remaining > 0 ? remaining : nil
        markFinished(delivery)
        return delivery
    }

    /// A delivery taken off its queue that could not start: its outcome is written like an answer's.
    mutating func finishUnsent(_ held: Held) { markFinished(held.delivery) }

    /// Lets go of an endpoint's queued deliveries: rows' leases run out and they are claimed again;
    /// a stream is read again after what is still in flight.
    mutating func dropQueued(endpointID: String) {
        let dropped = queued.removeValue(forKey: endpointID)?.elements ?? []
        queuedCount -= dropped.count
        guard var stream = streams[endpointID] else { return }
        let droppedPositions = Set(dropped.compactMap(\.delivery.position))
        stream.held.removeAll { droppedPositions.contains($0.position) }
        if let last = stream.held.last?.position ?? stream.finishedThrough {
            stream.readThrough = last
            streams[endpointID] = stream
            settle(endpointID)
        } else {
            // Nothing of it finished or held: the next claim reads after the cursor.
            streams[endpointID] = nil
        }
    }

    private mutating func markFinished(_ delivery: WebhookDelivery) {
        guard let position = delivery.position,
            let index = streams[delivery.endpointID]?.held.firstIndex(where: { $0.position == position })
        else { return }
        streams[delivery.endpointID]?.held[index].finished = true
        settle(delivery.endpointID)
    }

    /// Moves a stream's cursor past its run of finished deliveries (to what was read, once none is held).
    private mutating func settle(_ endpointID: String) {
        guard var stream = streams[endpointID] else { return }
        while let first = stream.held.first, first.finished {
            stream.finishedThrough = first.position
            stream.held.removeFirst()
        }
        if stream.held.isEmpty { stream.finishedThrough = stream.readThrough }
        streams[endpointID] = stream
    }
}

/// A first-in, first-out queue whose `popFirst` moves nothing: `Array.removeFirst` moved the rest
/// of an endpoint's queue (up to 256 deliveries) for every attempt started.
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var elements: ArraySlice<Element> { items[head...] }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let first = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 32, head * 2 >= items.count {
            // What was taken is dropped once it is half the storage: moving the rest then costs
            // at most as many moves as the pops it follows.
            items.removeFirst(head)
            head = 0
        }
        return first
    }
}

/// What the dispatcher's thread sends with: its transport and its signing keys, both its own, and
/// the thread that makes its store calls.
private struct AttemptSender {
    let transport: WebhookTransport
    let signer: WebhookSigner
    let storeCalls: StoreCallThread
}

/// Hands the transport, made on the starting thread (where its failure can be reported), to the
/// dispatcher's thread, its only user from then on.
private final class TransportBox: @unchecked Sendable {
    // Unchecked: written once before the thread starts and read once by it; the thread start orders the two.
    private var transport: WebhookTransport?
    init(_ transport: WebhookTransport) { self.transport = transport }
    func take() -> WebhookTransport {
        defer { transport = nil }
        return transport!
    }
}

/// The webhook metric families.
struct WebhookMetrics: Sendable {
    let attempts: Counter
    let duration: Histogram
    let endpointsDisabled: Counter

    init(registry: MetricsRegistry, store: any WebhookStore) {
        attempts = registry.counter(
            "deliveryd_webhook_attempts_total",
            help: "Webhook attempts, by what came of them: delivered, retry (tried again later) or failed (given up).",
            labels: ["result"])
        duration = registry.histogram(
            "deliveryd_webhook_attempt_duration_seconds", help: "One webhook POST, sent to answered or failed.",
            buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        endpointsDisabled = registry.counter(
            "deliveryd_webhook_endpoints_disabled_total",
            help: "Endpoints deliveryd disabled (410 Gone, or failing for days).")
        let deliveries = registry.gauge(
            "deliveryd_webhook_deliveries",
            help:
                "Webhook deliveries waiting (pending) or being sent (sending); delivered and failed ones are counted by deliveryd_webhook_attempts_total.",
            labels: ["state"])
        let oldestPending = registry.gauge(
            "deliveryd_webhook_oldest_pending_age_seconds",
            help: "How long the oldest due webhook delivery has waited (0 when none).")
        let endpoints = registry.gauge(
            "deliveryd_webhook_endpoints",
            help: "Webhook endpoints by health: delivering, failing (no delivery since a failure), disabled.",
            labels: ["health"])
        registry.addCollector { [weak registry] in
            guard registry != nil, let counts = try? store.webhookQueueCounts(endpointID: nil),
                let all = try? store.webhookEndpoints(merchantID: nil)
            else { return }
            deliveries.replaceAll([(["pending"], Double(counts.pending)), (["sending"], Double(counts.sending))])
            oldestPending.set(counts.oldestPendingDue.map { max(0, Date().timeIntervalSince($0)) } ?? 0)
            endpoints.replaceAll([
                (["delivering"], Double(all.filter { $0.enabled && $0.failingSince == nil }.count)),
                (["failing"], Double(all.filter { $0.enabled && $0.failingSince != nil }.count)),
                (["disabled"], Double(all.filter { !$0.enabled }.count)),
            ])
        }
    }
}

/// The dispatcher as one of the process's services.
///
/// Concurrency: one thread of its own runs the rounds (claims, libcurl's multi handle, outcomes), so
/// that a slow receiver never delays a push; the service's task only awaits.
extension WebhookDispatcher: Service {
    public var name: String { "webhooks" }

    /// Dispatches until `beginShutdown`, then stops as `stop(timeout:)` does.
    public func run() async throws {
        try start()
        await stopAsked.wait()
        let stoppedInTime = await runBlocking(threadName: "webhooks-stop") {
            self.stop(timeout: Self.stopGrace + 2)
        }
        if !stoppedInTime {
            logger.warning("webhook.stop_timeout", ["note": "leased deliveries are sent again after the lease"])
        }
    }

    public func beginShutdown() { stopAsked.open() }
}
