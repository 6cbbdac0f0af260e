import Cryptography
import DeliveryActivityContract
import Foundation
import OrderDomain
import Pusher
import Storage
import Synchronization
import Telemetry
import TestSupport
import Testing

/// Stores a placed order of customer c-1 with an ETA 30 minutes after `now`.
func createOrder(in store: Database, id: String, number: String, at now: Date) throws {
    let draft = OrderDraft(
        number: number, merchantName: "Pizza Roma", items: [.init(name: "Tea", quantity: 1, price: 2)],
        customer: .init(id: "c-1", name: "Ana", phone: "+49 30 1234567", locale: "en"), address: "Somewhere 1",
        payment: .init(method: "cash", brand: nil, last4: nil), estimatedArrival: now.addingTimeInterval(1800),
        note: nil
    )
    let (order, event) = try draft.validated(id: id, merchantID: "m-1", by: .admin, at: now)
    _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: now)
}

/// `count` orders `o-0`… with one activity each (tokens `token-o-N-0`) and one due push per order.
func queuePushes(_ count: Int, numbered prefix: String, in store: Database, at now: Date) throws {
    let orders = try (0..<count).map { index in
        try OrderDraft(
            number: "\(prefix)-\(index)", merchantName: "Pizza Roma",
            items: [.init(name: "Tea", quantity: 1, price: 2)],
            customer: .init(id: "c-\(index)", name: "Ana", phone: "+49 30 1234567", locale: "en"),
            address: "Somewhere 1", payment: .init(method: "cash", brand: nil, last4: nil),
            estimatedArrival: now.addingTimeInterval(1800), note: nil
        ).validated(id: "o-\(index)", merchantID: "m-1", by: .admin, at: now)
    }
    // Each registration queues the activity's first push.
    try store.bulkInsert(orders, activitiesPerOrder: 1, now: now)
}

/// Runs `worker` batch after batch until the outbox is empty or `seconds` passed.
func drain(_ store: Database, with worker: PushWorker, within seconds: Double) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try store.outboxDepth().count > 0, Date() < deadline {
        if try await worker.runOnce(now: Date()) == 0 { try await Task.sleep(for: .milliseconds(20)) }
    }
}

@Suite("Push worker: outbox to APNs simulator", .serialized)
struct PushWorkerTests {
    /// A batch slower than its lease (APNs answers after 8 s, the lease is 2 s) keeps its rows: the
    /// worker's lease keeper moves the lease forward, so another worker claiming meanwhile gets
    /// nothing, and the push goes out once. The rows are free again once the outcome is written.
    @Test func aSlowBatchKeepsItsLease() async throws {
        let directory = NSTemporaryDirectory() + "push-lease-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory, synchronous: .normal))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["*": ["delay_ms": 8000]])
        try queuePushes(1, numbered: "S", in: store, at: Date())
        let (caFile, baseURL) = (simulator.caFile, simulator.baseURL)

        let sending = Task.detached {
            let worker = PushWorker(
                store: store, sender: try APNsClient(caFile: caFile),
                tokens: ProviderTokenCache(
                    key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
                configuration: modified(PusherConfiguration(apnsURL: baseURL)) {
                    $0.lease = 2
                },
                owner: "slow-worker", logger: Logger(label: "test", minimumLevel: .error))
            return try await worker.runOnce(now: Date())
        }
        // On a thread of its own (the worker blocks a pool thread in libcurl): wait until the batch is
        // in flight (however long the worker waits for a pool thread: no deadline), then past its
        // original lease, and claim as another worker would.
        let observed = Mutex<(early: Int, stolen: [Int64])?>(nil)
        let done = DispatchSemaphore(value: 0)
        let workerFinished = Mutex(false)
        let recordFile = simulator.directory + "/record.jsonl"
        @Sendable func lines(_ path: String) -> Int {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        Thread {
            defer { done.signal() }
            while lines(recordFile + ".arrivals") == 0, !workerFinished.withLock({ $0 }) { usleep(20_000) }
            sleep(3)
            let early = lines(recordFile)
            let stolen = (try? store.claimDue(owner: "other-worker", now: Date(), lease: 2, limit: 10)) ?? []
            if lines(recordFile + ".arrivals") > 0 { observed.withLock { $0 = (early, stolen.map(\.id)) } }
        }.start()

        let sent = try await sending.value
        workerFinished.withLock { $0 = true }
        #expect(sent == 1)
        done.wait()
        let (early, stolen) = try #require(observed.withLock { $0 }, "the push never reached the simulator")
        try #require(early == 0, "the answer came before the lease ran out: nothing was tested")
        #expect(stolen.isEmpty, "another worker took a held row: \(stolen)")
        #expect(try store.outboxDepth().count == 0)
        #expect(try simulator.records().count == 1)
        #expect(try store.pushLog(orderID: "o-0").map(\.httpStatus) == [200])
    }

    /// A status change reaches the live activity as one update; a token APNs reports unregistered is
    /// removed; `delivered` ends the activity, and its token is gone afterwards; every attempt is logged.
    @Test func outboxDrainsIntoSimulator() async throws {
        let directory = NSTemporaryDirectory() + "push-worker-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["dead-token": ["status": 410, "reason": "Unregistered", "timestamp": 4_102_444_800_000]])

        let now = Date()
        try createOrder(in: store, id: "o-1", number: "A-1", at: now)
        for (activity, token) in [("live", "live-token"), ("dead", "dead-token")] {
            _ = try store.registerActivity(
                orderID: "o-1", activityID: activity, pushToken: token, environment: .development,
                bundleID: "com.example.app", shown: nil, now: now
            )
        }
        func set(_ status: OrderStatus) throws {
            _ = try store.change(orderID: "o-1", now: Date()) { current throws(OrderError) in
                try current.applying(StatusChange(status: status), by: .admin, at: Date())
            }
        }
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(apnsURL: simulator.baseURL)
        )

        try set(.delivering)
        #expect(try await worker.runOnce(now: Date()) == 2)
        #expect(try await worker.runOnce(now: Date()) == 0)
        #expect(try store.activity(orderID: "o-1", activityID: "dead")?.endedReason == "Unregistered")
        #expect(try store.activity(orderID: "o-1", activityID: "live")?.shown?.status == .delivering)

        try set(.delivered)
        #expect(try await worker.runOnce(now: Date()) == 1)
        let live = try #require(try store.activity(orderID: "o-1", activityID: "live"))
        #expect(live.endedReason == "ended" && live.pushToken.isEmpty)

        let records = try simulator.records()
        #expect(records.count == 3)
        #expect(records.filter { ($0["token"] as? String) == "dead-token" }.count == 1)
        let livePayloads = records.filter { ($0["token"] as? String) == "live-token" }.compactMap {
            $0["payload"] as? String
        }
        #expect(livePayloads.count == 2)
        #expect(livePayloads[0].contains(#""event":"update""#) && livePayloads[0].contains(#""status":"delivering""#))
        #expect(livePayloads[1].contains(#""event":"end""#) && livePayloads[1].contains(#""status":"delivered""#))
        #expect(!records.contains { ($0["payload"] as? String)?.contains("+49") == true })
        let log = try store.pushLog(orderID: "o-1")
        #expect(log.compactMap(\.httpStatus).sorted() == [200, 200, 410])
        #expect(log.first { $0.httpStatus == 410 }?.reason == "Unregistered")
        #expect(try store.outboxDepth().count == 0)
    }
}

extension PushWorkerTests {
    /// Pushes of one activity carry strictly increasing `aps.timestamp`s: two in the same second, one
    /// after the clock stepped back five minutes, and one after a restart on the same data (the last
    /// accepted timestamp is kept with the activity). Each is an update iOS would otherwise drop.
    @Test func timestampsIncreaseThroughOneSecondAClockStepAndARestart() async throws {
        let directory = NSTemporaryDirectory() + "push-worker-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        func worker(_ store: Database) throws -> PushWorker {
            PushWorker(
                store: store, sender: try APNsClient(caFile: simulator.caFile),
                tokens: ProviderTokenCache(
                    key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
                configuration: PusherConfiguration(apnsURL: simulator.baseURL))
        }
        func set(_ status: OrderStatus, in store: Database, at time: Date) throws {
            _ = try store.change(orderID: "o-1", now: time) { current throws(OrderError) in
                try current.applying(StatusChange(status: status), by: .admin, at: time)
            }
        }
        do {
            let store = try Database.open(StorageConfiguration(dataDirectory: directory))
            try createOrder(in: store, id: "o-1", number: "A-1", at: start)
            _ = try store.registerActivity(
                orderID: "o-1", activityID: "a", pushToken: "token-a", environment: .development,
                bundleID: "com.example.app", shown: nil, now: start)
            let pusher = try worker(store)
            #expect(try await pusher.runOnce(now: start.addingTimeInterval(0.2)) == 1)
            try set(.preparing, in: store, at: start)
            #expect(try await pusher.runOnce(now: start.addingTimeInterval(0.6)) == 1)
            try set(.pickup, in: store, at: start.addingTimeInterval(-300))
            #expect(try await pusher.runOnce(now: start.addingTimeInterval(-300)) == 1)
        }
        let reopened = try Database.open(StorageConfiguration(dataDirectory: directory))
        try set(.delivering, in: reopened, at: start.addingTimeInterval(-290))
        #expect(try await worker(reopened).runOnce(now: start.addingTimeInterval(-290)) == 1)

        let timestamps = try simulator.records().compactMap { record -> Int? in
            guard let payload = (record["payload"] as? String)?.data(using: .utf8),
                let json = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
                let aps = json["aps"] as? [String: Any]
            else { return nil }
            return aps["timestamp"] as? Int
        }
        let first = Int(start.timeIntervalSince1970)
        #expect(timestamps == [first, first + 1, first + 2, first + 3])
    }
}

@Suite("Log sender")
struct LogSenderTests {
    /// Without APNs credentials pushes drain through the log sender, marked as not delivered in the
    /// push log, with one log line per push that carries no full token.
    @Test func drainsAndMarksNotDelivered() async throws {
        let directory = NSTemporaryDirectory() + "log-sender-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let now = Date()
        try createOrder(in: store, id: "o-2", number: "A-2", at: now)
        _ = try store.registerActivity(
            orderID: "o-2", activityID: "a", pushToken: "0123456789abcdef0123", environment: .production,
            bundleID: "com.example.app", shown: nil, now: now
        )
        _ = try store.change(orderID: "o-2", now: now) { current throws(OrderError) in
            try current.applying(StatusChange(status: .pickup), by: .admin, at: now)
        }
        final class Lines {
            var values: [String] = []
        }
        let lines = Lines()
        let worker = PushWorker(
            store: store, sender: LogSender { lines.values.append($0) }, tokens: nil,
            configuration: PusherConfiguration()
        )
        #expect(try await worker.runOnce(now: Date()) == 1)
        #expect(try store.outboxDepth().count == 0)
        #expect(try store.pushLog(orderID: "o-2").map(\.reason) == ["not_delivered_log_sender"])
        #expect(lines.values.count == 1)
        let line = try #require(
            try JSONSerialization.jsonObject(with: Data(lines.values[0].utf8)) as? [String: Any])
        #expect(line["message"] as? String == "push.not_delivered")
        #expect(line["level"] as? String == "info")
        #expect(line["device.token.prefix"] as? String == "01234567")
        #expect(!lines.values[0].contains("0123456789abcdef0123"))
        // The payload is the push's own JSON, whole, as a string.
        let payload = try #require(line["payload"] as? String)
        let aps = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        #expect(aps["aps"] != nil)
    }
}

@Suite("Coalescing through the worker", .serialized)
struct CoalescingTests {
    /// 100 ETA changes queued while nothing is sent become one push carrying the last state.
    @Test func backlogDrainsAsOnePush() async throws {
        let directory = NSTemporaryDirectory() + "coalesce-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let now = Date()
        try createOrder(in: store, id: "o-3", number: "A-3", at: now)
        _ = try store.registerActivity(
            orderID: "o-3", activityID: "a", pushToken: "coalesced-token", environment: .development,
            bundleID: "com.example.app", shown: nil, now: now
        )
        var lastETA = now
        for step in 1...100 {
            lastETA = now.addingTimeInterval(1800 + Double(step) * 60)
            _ = try store.change(orderID: "o-3", now: now) { current throws(OrderError) in
                try current.changingEstimatedArrival(to: lastETA, by: .admin, at: now)
            }
        }
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(apnsURL: simulator.baseURL)
        )
        #expect(try await worker.runOnce(now: Date()) == 1)
        let records = try simulator.records()
        try #require(records.count == 1)
        // The projection rounds ETAs to the minute and writes seconds since 2001-01-01.
        let roundedUnix = (lastETA.timeIntervalSince1970 / 60).rounded() * 60
        let expected = Int(roundedUnix - Date.timeIntervalBetween1970AndReferenceDate)
        #expect((records[0]["payload"] as? String)?.contains(#""estimatedArrival":\#(expected)"#) == true)
        #expect(try await worker.runOnce(now: Date()) == 0)
    }
}

@Suite("Retries under load", .serialized)
struct RetryUnderLoadTests {
    /// 10,000 pushes while APNs answers 30 % of requests with 503 or 429: every live activity gets
    /// exactly one accepted push as the worker sees it (and no more than the answers it never saw
    /// explain), nothing is lost or dead-lettered, and each of 100 dead tokens gets its one request
    /// and nothing after it.
    @Test func tenThousandPushesThroughThirtyPercentFailures() async throws {
        let directory = NSTemporaryDirectory() + "retry-load-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory, synchronous: .normal))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let count = 10_000
        let deadTokens = (0..<100).map { "token-o-\($0 * 100)-0" }
        var script: [String: [String: Any]] = [
            "*": ["failure_fraction": 0.3, "failures": [[503, "ServiceUnavailable"], [429, "TooManyRequests"]]]
        ]
        for token in deadTokens {
            script[token] = ["status": 410, "reason": "Unregistered", "timestamp": 4_102_444_800_000]
        }
        try simulator.script(script)

        let now = Date()
        try queuePushes(count, numbered: "L", in: store, at: now)

        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: modified(
                PusherConfiguration(apnsURL: simulator.baseURL)
            ) {
                $0.batchSize = 1000
                $0.retryPolicy = RetryPolicy(baseDelay: 0.02, maximumDelay: 0.2)
            },
            logger: Logger(label: "test", minimumLevel: .error)
        )
        try await drain(store, with: worker, within: 600)
        #expect(try store.outboxDepth().count == 0)
        #expect(try store.deadLetters(limit: 10).isEmpty)

        var requests: [String: [Int]] = [:]
        for record in try simulator.records() {
            requests[record["token"] as? String ?? "", default: []].append(record["status"] as? Int ?? 0)
        }
        let dead = Set(deadTokens)
        var failures = 0
        for index in 0..<count {
            let token = "token-o-\(index)-0"
            let statuses = requests[token] ?? []
            if dead.contains(token) {
                // Sent until APNs's 410 was seen, then never again: one more 410 per attempt whose
                // answer came after the client's timeout on a loaded machine.
                let attempts = try store.pushLog(orderID: "o-\(index)")
                let unanswered = attempts.filter { $0.httpStatus == nil }.count
                #expect(attempts.compactMap(\.httpStatus).last == 410, "\(token): saw \(attempts)")
                #expect(
                    statuses.allSatisfy { $0 == 410 } && (1...1 + unanswered).contains(statuses.count),
                    "\(token): \(statuses), \(unanswered) unanswered")
            } else {
                // What the worker saw: failures, then the one acceptance. An answer that came after the
                // client's timeout (a loaded machine) was never seen, so its push went again: the
                // simulator may hold one more acceptance per unanswered attempt, and no more.
                let attempts = try store.pushLog(orderID: "o-\(index)")
                let seen = attempts.compactMap(\.httpStatus)
                let unanswered = attempts.count - seen.count
                #expect(seen.last == 200 && seen.filter { $0 == 200 }.count == 1, "\(token): saw \(seen)")
                #expect(seen.dropLast().allSatisfy { $0 == 503 || $0 == 429 }, "\(token): saw \(seen)")
                let accepted = statuses.filter { $0 == 200 }.count
                #expect(accepted >= 1 && accepted <= 1 + unanswered, "\(token): \(statuses), \(unanswered) unanswered")
                #expect(statuses.allSatisfy { [200, 503, 429].contains($0) }, "\(token): \(statuses)")
                failures += statuses.count - accepted
            }
        }
        let share = Double(failures) / Double(requests.values.map(\.count).reduce(0, +))
        #expect((0.2...0.4).contains(share), "503/429 share \(share)")
        #expect(try store.activity(orderID: "o-0", activityID: "a0")?.endedReason == "Unregistered")
        #expect(try store.activity(orderID: "o-1", activityID: "a0")?.shown?.fingerprint != nil)
    }
}

@Suite("Paused environment", .serialized)
struct EnvironmentPauseTests {
    /// APNs refusing our topic pauses that environment: its rows wait without being sent while the
    /// other environment goes on; after the pause they are tried again, and the pause is counted.
    @Test func configurationErrorPausesOneEnvironment() async throws {
        let directory = NSTemporaryDirectory() + "pause-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["refused-token": ["status": 400, "reason": "BadTopic"]])
        let now = Date()
        for (index, (token, environment)) in [
            ("refused-token", PushEnvironment.development), ("waiting-token", .development),
            ("other-env-token", .production),
        ].enumerated() {
            try createOrder(in: store, id: "o-\(index)", number: "A-\(index)", at: now)
            _ = try store.registerActivity(
                orderID: "o-\(index)", activityID: "a", pushToken: token, environment: environment,
                bundleID: "com.example.app", shown: nil, now: now)
        }
        let registry = MetricsRegistry()
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(apnsURL: simulator.baseURL),
            metrics: PushMetrics(registry: registry), logger: Logger(label: "test", minimumLevel: .error)
        )
        func change(_ status: OrderStatus, at time: Date) throws {
            for index in 0..<3 {
                _ = try store.change(orderID: "o-\(index)", now: time) { order throws(OrderError) in
                    try order.applying(StatusChange(status: status), by: .admin, at: time)
                }
            }
        }
        try change(.preparing, at: now)
        #expect(try await worker.runOnce(now: now) == 3)
        #expect(try simulator.records().count == 3)

        let later = now.addingTimeInterval(5)
        try change(.pickup, at: later)
        #expect(try await worker.runOnce(now: later) == 3)
        let afterPause = try simulator.records()
        #expect(afterPause.count == 4, "only the production push went out during the pause")
        #expect(afterPause.last?["token"] as? String == "other-env-token")
        #expect(try store.outboxDepth().count == 2)

        let resumed = now.addingTimeInterval(31)
        #expect(try await worker.runOnce(now: resumed) == 2)
        #expect(try simulator.records().count == 6)
        #expect(try store.deadLetters(limit: 10).isEmpty)
        #expect(
            registry.prometheusText().contains(
                #"deliveryd_apns_environment_pauses_total{environment="development",reason="BadTopic"} 2"#))
    }
}

@Suite("Several apps in one pusher", .serialized)
struct SeveralAppsTests {
    /// Each activity is pushed with its own app's topic and key: the white-label app's key is only
    /// good for its topic (the simulator refuses it elsewhere, as APNs does), and both pushes pass.
    @Test func eachAppUsesItsKey() async throws {
        let directory = NSTemporaryDirectory() + "apps-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(
            publicKeyOf: testKeyPEM,
            appKeys: [(keyID: "WHITE12345", bundleID: "com.whitelabel.app", privateKeyPEM: secondTestKeyPEM)])
        defer { simulator.stop() }
        let now = Date()
        for (index, bundle) in ["com.example.app", "com.whitelabel.app"].enumerated() {
            try createOrder(in: store, id: "o-\(index)", number: "A-\(index)", at: now)
            _ = try store.registerActivity(
                orderID: "o-\(index)", activityID: "a", pushToken: "token-\(index)", environment: .development,
                bundleID: bundle, shown: nil, now: now)
            _ = try store.change(orderID: "o-\(index)", now: now) { order throws(OrderError) in
                try order.applying(StatusChange(status: .preparing), by: .admin, at: now)
            }
        }
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            appTokens: [
                "com.whitelabel.app": ProviderTokenCache(
                    key: try P256SigningKey(pem: secondTestKeyPEM), keyID: "WHITE12345", teamID: "WHITETEAM1")
            ],
            configuration: PusherConfiguration(apnsURL: simulator.baseURL),
            logger: Logger(label: "test", minimumLevel: .error)
        )
        #expect(try await worker.runOnce(now: now) == 2)
        let records = try simulator.records().sorted { ($0["token"] as? String ?? "") < ($1["token"] as? String ?? "") }
        try #require(records.count == 2)
        #expect(records.map { $0["status"] as? Int } == [200, 200], "\(records.map { $0["reason"] ?? "" })")
        let topics = records.map { ($0["headers"] as? [String: String])?["apns-topic"] }
        #expect(topics == ["com.example.app.push-type.liveactivity", "com.whitelabel.app.push-type.liveactivity"])
    }
}

@Suite("APNs cuts the connection mid-batch", .serialized)
struct ConnectionDropTests {
    /// The peer cuts every connection while a batch is in flight (no answer, no GOAWAY): the streams
    /// cut off count as transport failures and are retried on a new connection; every activity gets
    /// its push accepted, nothing is dead-lettered.
    @Test func cutStreamsAreRetriedOnANewConnection() async throws {
        let directory = NSTemporaryDirectory() + "drop-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory, synchronous: .normal))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM, droppable: true)
        defer { simulator.stop() }
        try simulator.script(["*": ["delay_ms": 400], "token-o-60-0": ["drop_once": true]])

        let now = Date()
        let count = 200
        try queuePushes(count, numbered: "D", in: store, at: now)

        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: modified(
                PusherConfiguration(apnsURL: simulator.baseURL)
            ) {
                $0.batchSize = 500
                $0.retryPolicy = RetryPolicy(baseDelay: 0.05, maximumDelay: 0.5)
            },
            logger: Logger(label: "test", minimumLevel: .error)
        )
        try await drain(store, with: worker, within: 120)
        #expect(simulator.drops() == ["token-o-60-0"])
        #expect(try store.outboxDepth().count == 0)
        #expect(try store.deadLetters(limit: 10).isEmpty)

        var cut = 0
        for index in 0..<count {
            let attempts = try store.pushLog(orderID: "o-\(index)")
            #expect(attempts.last?.httpStatus == 200, "o-\(index): \(attempts.map { $0.reason ?? "200" })")
            cut += attempts.filter { $0.httpStatus == nil }.count
        }
        #expect(cut >= 1, "no stream was cut by the drop")
        let accepted = try simulator.records().filter { $0["token"] as? String == "token-o-60-0" }
        #expect(accepted.map { $0["status"] as? Int } == [200], "the dropped token is answered after the reconnect")
    }
}

@Suite("Two workers side by side", .serialized)
struct TwoWorkersTests {
    /// Two workers drain one outbox as deliveryd runs them (`run`, one signal, shared pauses): every
    /// activity gets exactly one accepted push, none is claimed by both.
    @Test func twoWorkersNeverSendOneActivityTwice() async throws {
        let directory = NSTemporaryDirectory() + "two-workers-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Database.open(StorageConfiguration(dataDirectory: directory, synchronous: .normal))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let now = Date()
        let count = 2000
        try queuePushes(count, numbered: "W", in: store, at: now)

        let signal = OutboxSignal()
        let pauses = EnvironmentPauses()
        let caFile = simulator.caFile
        let baseURL = simulator.baseURL
        let tokens = ProviderTokenCache(
            key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        // A worker whose client cannot be built ends the wait at once and fails the test with its error.
        final class Flag: Sendable { let raised = Atomic<Bool>(false) }
        let failed = Flag()
        let workers = (0..<2).map { index in
            Task.detached { () throws -> Void in
                let client: APNsClient
                do {
                    client = try APNsClient(caFile: caFile)
                } catch {
                    failed.raised.store(true, ordering: .relaxed)
                    throw error
                }
                let worker = PushWorker(
                    store: store, sender: client, tokens: tokens,
                    configuration: modified(PusherConfiguration(apnsURL: baseURL)) {
                        $0.batchSize = 200
                    },
                    owner: "worker-\(index)", logger: Logger(label: "test", minimumLevel: .error), pauses: pauses)
                await worker.run(signal: signal, idlePoll: .milliseconds(50)) { _ in }
            }
        }
        signal.notify()
        let deadline = Date().addingTimeInterval(120)
        while try store.outboxDepth().count > 0, !failed.raised.load(ordering: .relaxed), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        for worker in workers { worker.cancel() }
        for worker in workers { try await worker.value }

        #expect(try store.outboxDepth().count == 0)
        var accepted: [String: Int] = [:]
        for record in try simulator.records() where record["status"] as? Int == 200 {
            accepted[record["token"] as? String ?? "", default: 0] += 1
        }
        #expect(accepted.count == count)
        #expect(accepted.values.allSatisfy { $0 == 1 }, "an activity was pushed twice")
    }
}

@Suite("BadDeviceToken: a dead token, or the wrong environment", .serialized)
struct BadDeviceTokenTests {
    struct Setup {
        let store: Database
        let simulator: APNsSimulator
        let worker: PushWorker
        let pauses: EnvironmentPauses
        let directory: String
    }

    /// Orders `o-0`… each with one activity of `tokens[i]` in `environment`, a push queued for each.
    static func setup(tokens: [String], environment: PushEnvironment, script: [String: [String: Any]]) throws
        -> Setup
    {
        let directory = NSTemporaryDirectory() + "bad-token-" + UUID().uuidString
        let store = try Database.open(StorageConfiguration(dataDirectory: directory))
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        try simulator.script(script)
        let now = Date()
        for (index, token) in tokens.enumerated() {
            try createOrder(in: store, id: "o-\(index)", number: "A-\(index)", at: now)
            _ = try store.registerActivity(
                orderID: "o-\(index)", activityID: "a", pushToken: token, environment: environment,
                bundleID: "com.example.app", shown: nil, now: now)
            _ = try store.change(orderID: "o-\(index)", now: now) { order throws(OrderError) in
                try order.applying(StatusChange(status: .preparing), by: .admin, at: now)
            }
        }
        let pauses = EnvironmentPauses()
        let worker = PushWorker(
            store: store, sender: try APNsClient(caFile: simulator.caFile),
            tokens: ProviderTokenCache(
                key: try P256SigningKey(pem: testKeyPEM), keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            configuration: PusherConfiguration(apnsURL: simulator.baseURL),
            metrics: PushMetrics(registry: MetricsRegistry()), logger: Logger(label: "test", minimumLevel: .error),
            pauses: pauses)
        return Setup(store: store, simulator: simulator, worker: worker, pauses: pauses, directory: directory)
    }

    /// Every token of an environment answered `BadDeviceToken` and none delivered (sandbox tokens
    /// on the production host, or the wrong key's environment): no token is deleted, the pushes are
    /// dead letters to replay once the setting is fixed, and the environment is paused.
    @Test func everyTokenRefusedDeletesNoToken() async throws {
        let tokens = (0..<4).map { "sandbox-token-\($0)" }
        let setup = try Self.setup(
            tokens: tokens, environment: .production,
            script: Dictionary(uniqueKeysWithValues: tokens.map { ($0, ["status": 400, "reason": "BadDeviceToken"]) }))
        defer {
            setup.simulator.stop()
            try? FileManager.default.removeItem(atPath: setup.directory)
        }
        let now = Date()
        #expect(try await setup.worker.runOnce(now: now) == 4)
        #expect(try setup.simulator.records().count == 4)
        for index in 0..<4 {
            #expect(try setup.store.liveActivities(orderID: "o-\(index)").count == 1, "o-\(index) lost its token")
        }
        #expect(try setup.store.deadLetters(limit: 10).count == 4)
        #expect(setup.pauses.pausedUntil(.production, now: now.addingTimeInterval(1)) != nil)
    }

    /// One `BadDeviceToken` among delivered pushes of the same environment is a dead token: removed,
    /// wherever it stands in the batch.
    @Test func oneRefusedAmongDeliveredIsRemoved() async throws {
        let tokens = ["dead-token", "live-token-1", "live-token-2", "live-token-3"]
        let setup = try Self.setup(
            tokens: tokens, environment: .production,
            script: ["dead-token": ["status": 400, "reason": "BadDeviceToken"]])
        defer {
            setup.simulator.stop()
            try? FileManager.default.removeItem(atPath: setup.directory)
        }
        let now = Date()
        #expect(try await setup.worker.runOnce(now: now) == 4)
        #expect(try setup.store.liveActivities(orderID: "o-0").isEmpty, "the dead token must be removed")
        for index in 1..<4 { #expect(try setup.store.liveActivities(orderID: "o-\(index)").count == 1) }
        #expect(try setup.store.deadLetters(limit: 10).isEmpty)
        #expect(setup.pauses.pausedUntil(.production, now: now) == nil)
    }
}
