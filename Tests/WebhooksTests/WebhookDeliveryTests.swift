import Cryptography
import Foundation
import OrderDomain
import Storage
import Synchronization
import Telemetry
import TestSupport
import Testing

@testable import Webhooks

/// The dispatcher against real receivers on loopback (Tests/webhook-receiver, which verifies every
/// delivery with the reference `standardwebhooks` library), on a real SQLite store.
@Suite("Webhook delivery", .serialized)
struct WebhookDeliveryTests {
    /// A store, a sealing key and a dispatcher sending from them.
    final class Harness {
        let directory = NSTemporaryDirectory() + "webhook-delivery-" + UUID().uuidString
        let store: Database
        let sealingKey = SealingKey.generate()
        let dispatcher: WebhookDispatcher
        let log = LogLines()
        private var orders = 0

        init(
            policy: WebhookURLPolicy = WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true),
            timeout: Double = 20, niceness: Int32 = WebhookDispatcherConfiguration(policy: .init()).threadNiceness
        )
            throws
        {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            store = try Database.open(StorageConfiguration(dataDirectory: directory))
            var configuration = WebhookDispatcherConfiguration(policy: policy)
            configuration.timeoutSeconds = timeout
            configuration.retrySchedule = WebhookRetrySchedule(delays: Array(repeating: 0.2, count: 200))
            configuration.perEndpoint = 2
            configuration.pollInterval = 0.05
            configuration.threadNiceness = niceness
            let log = self.log
            dispatcher = WebhookDispatcher(
                store: store, sealingKey: sealingKey, configuration: configuration, owner: "test",
                registry: MetricsRegistry(), logger: Logger(label: "webhooks", sink: { log.append($0) }))
            try dispatcher.start()
        }

        deinit {
            dispatcher.stop(timeout: 5)
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Registers an endpoint of `merchant` at `url`; returns its id and secret (`whsec_…`).
        @discardableResult
        func endpoint(_ url: String, merchant: String = "m-1", types: [WebhookEventType] = []) throws -> (
            id: String, secret: String
        ) {
            let id = "ep_" + UUID().uuidString.prefix(8).lowercased()
            let secret = WebhookSecret.generate()
            try store.createWebhookEndpoint(
                WebhookEndpointRecord(
                    id: id, merchantID: merchant, url: url, description: "", eventTypes: types, enabled: true,
                    secretSealed: try secret.sealed(with: sealingKey, endpointID: id), now: Date()))
            return (id, secret.text)
        }

        /// Creates `count` orders of `merchant`: one `order.status_changed` event each. Returns their ids.
        @discardableResult
        func orders(_ count: Int, merchant: String = "m-1") throws -> [String] {
            try (0..<count).map { _ in
                orders += 1
                return try WebhookDeliveryTests.createOrder(number: orders, merchant: merchant, in: store)
            }
        }

        /// Event ids of `merchant`, oldest first.
        func eventIDs(merchant: String = "m-1") throws -> [String] {
            try store.webhookEvents(merchantID: merchant, limit: 1000).map(\.id).reversed()
        }

        /// Waits (polling) until `condition` holds; `timeout` only bounds a failure.
        func wait(timeout: Double = 30, until condition: () throws -> Bool) rethrows -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if try condition() { return true }
                usleep(20_000)
            }
            return try condition()
        }
    }

    /// Creates order `number` of `merchant` in `store` (one `order.status_changed` event); returns its id.
    static func createOrder(number: Int, merchant: String, in store: any DeliveryStore) throws -> String {
        let now = Date()
        let draft = OrderDraft(
            number: "N-\(number)", merchantName: "Pizza Roma",
            items: [.init(name: "Margherita", quantity: 1, price: 8.5)],
            customer: .init(id: "c-1", name: "Ana", phone: "+49 30 1234567", locale: "de-DE"),
            address: "Hauptstr. 1", payment: .init(method: "card", brand: "visa", last4: "4242"),
            estimatedArrival: now.addingTimeInterval(1800), note: nil)
        let (order, event) = try draft.validated(
            id: "o-\(merchant)-\(number)", merchantID: merchant, by: .merchant(id: merchant), at: now)
        _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: now)
        return order.id
    }

    /// What the dispatcher logged, for the tests that check what it said.
    final class LogLines: Sendable {
        private let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    static func headers(_ record: [String: Any]) -> [String: String] { record["headers"] as? [String: String] ?? [:] }

    static func webhookIDs(_ records: [[String: Any]], status: Int? = nil) -> [String] {
        records.filter { status == nil || $0["status"] as? Int == status }.compactMap { headers($0)["webhook-id"] }
    }

    /// Each event arrives once, signed as the specification says: the reference library verifies it,
    /// and so does the Swift verifier of docs/webhooks.md; the body is the stored event's.
    @Test func everyDeliveryVerifiesWithTheReferenceLibraryAndTheDocumentedSwift() throws {
        let receiver = try WebhookReceiver()
        let harness = try Harness()
        let endpoint = try harness.endpoint(receiver.url)
        try receiver.trust([endpoint.secret])
        try harness.orders(5)
        let events = try harness.store.webhookEvents(merchantID: "m-1", limit: 10)
        #expect(events.count == 5)
        #expect(receiver.wait { $0.count >= 5 })
        let records = receiver.records()
        #expect(records.count == 5, "one request per event, no duplicates")
        #expect(Set(Self.webhookIDs(records)) == Set(events.map(\.id)))
        for record in records {
            #expect(record["verified"] as? Bool == true, "the reference library refused \(record)")
            let body = Data((record["body"] as? String ?? "").utf8)
            #expect(verifyWebhook(secret: endpoint.secret, headers: Self.headers(record), body: body))
            #expect(!verifyWebhook(secret: endpoint.secret, headers: Self.headers(record), body: body + Data(" ".utf8)))
            #expect(
                !verifyWebhook(secret: WebhookSecret.generate().text, headers: Self.headers(record), body: body))
            let stored = try #require(events.first { $0.id == Self.headers(record)["webhook-id"] })
            #expect(body == Data(stored.body))
            #expect(Self.headers(record)["content-type"] == "application/json")
        }
        #expect(
            try harness.wait { try harness.store.webhookQueueCounts(endpointID: endpoint.id).delivered == 5 })
        #expect(try harness.store.webhookEndpoint(id: endpoint.id)?.lastDeliveredAt != nil)
    }

    /// A receiver that answers 500 for a while gets every event once it recovers, each under the id it
    /// had on the first attempt (what receivers de-duplicate on), with the attempts in the log.
    @Test func aReceiverFailingForAWhileGetsEverythingAfterwards() throws {
        let receiver = try WebhookReceiver()
        let harness = try Harness()
        let endpoint = try harness.endpoint(receiver.url)
        try receiver.trust([endpoint.secret])
        try receiver.control(["status": 500])
        try harness.orders(4)
        // Each event tried at least twice while failing.
        #expect(receiver.wait { records in Dictionary(grouping: Self.webhookIDs(records)) { $0 }.count == 4 })
        #expect(
            receiver.wait { records in
                Dictionary(grouping: Self.webhookIDs(records)) { $0 }.values.allSatisfy { $0.count >= 2 }
            })
        #expect(try harness.store.webhookEndpoint(id: endpoint.id)?.failingSince != nil)
        try receiver.control(["status": 200])
        #expect(receiver.wait { Set(Self.webhookIDs($0, status: 200)).count == 4 })
        #expect(Set(Self.webhookIDs(receiver.records(), status: 200)) == Set(try harness.eventIDs()))
        #expect(receiver.records().allSatisfy { $0["verified"] as? Bool == true })
        #expect(
            try harness.wait { try harness.store.webhookQueueCounts(endpointID: endpoint.id).delivered == 4 })
        #expect(try harness.store.webhookEndpoint(id: endpoint.id)?.failingSince == nil)
        let log = try harness.store.webhookAttempts(endpointID: endpoint.id, limit: 1000)
        #expect(log.filter { $0.httpStatus == 500 }.count >= 8)
        #expect(log.filter { $0.httpStatus == 200 }.count == 4)
    }

    /// `410 Gone` disables the endpoint at once (said in the log); `429` with `Retry-After` pauses it
    /// for that long.
    @Test func goneDisablesAndRetryAfterPauses() throws {
        let gone = try WebhookReceiver()
        let slow = try WebhookReceiver()
        let harness = try Harness()
        let goneEndpoint = try harness.endpoint(gone.url, merchant: "m-gone")
        let slowEndpoint = try harness.endpoint(slow.url, merchant: "m-slow")
        try gone.control(["status": 410])
        try slow.control(["status": 429, "retry_after": 2])
        try harness.orders(3, merchant: "m-gone")
        try harness.orders(1, merchant: "m-slow")

        #expect(try harness.wait { try harness.store.webhookEndpoint(id: goneEndpoint.id)?.enabled == false })
        let disabled = try #require(try harness.store.webhookEndpoint(id: goneEndpoint.id))
        #expect(disabled.disabledReason == "the receiver answered 410 Gone")
        // Said once the outcome is on disk, which a reader may see a moment before.
        #expect(
            harness.wait {
                harness.log.all.contains { $0.contains("webhook.endpoint_disabled") && $0.contains(goneEndpoint.id) }
            })
        // Deliveries of a disabled endpoint wait: nothing more reaches it.
        usleep(500_000)
        #expect(gone.records().count <= 2, "a disabled endpoint was still sent to: \(gone.records().count)")

        #expect(slow.wait { $0.count >= 1 })
        try slow.control(["status": 204])
        #expect(slow.wait { $0.count >= 2 })
        let times = slow.records().compactMap { $0["received_at"] as? Double }
        #expect(times[1] - times[0] >= 1.9, "the pause asked for was not kept: \(times[1] - times[0]) s")
        #expect(try harness.wait { try harness.store.webhookQueueCounts(endpointID: slowEndpoint.id).delivered == 1 })
    }

    /// The dispatcher's thread, and only it, runs at the configured niceness: webhooks give way to
    /// the request path when the cores are busy, and deliver all the same.
    @Test func theDispatcherThreadGivesWayToTheRequestPath() throws {
        let receiver = try WebhookReceiver()
        let startersNiceness = Self.niceness(statFile: "/proc/thread-self/stat")
        // A niceness no other test's dispatcher uses, so the thread found is this harness's.
        let harness = try Harness(niceness: 13)
        try harness.endpoint(receiver.url)
        try harness.orders(3)
        #expect(receiver.wait { $0.count == 3 }, "a dispatcher at niceness 13 delivers")
        #expect(Self.threadNicenesses().filter { $0 == 13 }.count == 1, "one thread at the dispatcher's niceness")
        #expect(
            Self.niceness(statFile: "/proc/thread-self/stat") == startersNiceness,
            "the thread that started it keeps its priority")
    }

    /// The niceness of every thread of this process.
    static func threadNicenesses() -> [Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { niceness(statFile: "/proc/self/task/\($0)/stat") }
    }

    /// Field 19 of a thread's `stat` file.
    static func niceness(statFile: String) -> Int? {
        guard let stat = try? String(contentsOfFile: statFile, encoding: .utf8), let nameEnd = stat.lastIndex(of: ")")
        else { return nil }
        // The fields after the command's closing parenthesis start at field 3 (the state).
        let fields = stat[stat.index(nameEnd, offsetBy: 2)...].split(separator: " ")
        return fields.count > 16 ? Int(fields[16]) : nil
    }

    /// A receiver that hangs holds its own endpoint's attempts (at most `perEndpoint`), never another's.
    @Test func aHangingReceiverHoldsUpNoOtherEndpoint() throws {
        let hanging = try WebhookReceiver()
        let healthy = try WebhookReceiver()
        let harness = try Harness(timeout: 60)
        let stuck = try harness.endpoint(hanging.url, merchant: "m-stuck")
        let fine = try harness.endpoint(healthy.url, merchant: "m-fine")
        try hanging.control(["hang_seconds": 120])
        try harness.orders(5, merchant: "m-stuck")
        #expect(hanging.wait { $0.count == 2 }, "the hanging receiver got its first two requests")
        try harness.orders(5, merchant: "m-fine")
        #expect(healthy.wait { $0.count == 5 })
        #expect(try harness.wait { try harness.store.webhookQueueCounts(endpointID: fine.id).delivered == 5 })
        // Two attempts on the wire, the rest waiting: none finished, so the cursor has not moved.
        let stuckCounts = try harness.store.webhookQueueCounts(endpointID: stuck.id)
        #expect(stuckCounts.pending == 5 && stuckCounts.delivered == 0)
        #expect(hanging.records().count == 2, "more than perEndpoint attempts went to the hanging receiver")
        hanging.stop()  // its connections drop: the attempts fail now instead of in a minute
    }

    /// No server-side request forgery: with the default policy a loopback or private address is refused
    /// on the address connected to, whatever name or spelling the URL uses, and a redirect is not followed.
    @Test func addressesOfTheOperatorsNetworkAreRefusedAtConnect() throws {
        let receiver = try WebhookReceiver()
        let target = try WebhookReceiver()
        let harness = try Harness(policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: false))
        let port = receiver.port
        // Spellings of an address the URL check lets through (it sees no literal address in them),
        // and a name: the API refuses `localhost` itself, but a name of the merchant's whose DNS
        // answers a loopback or private address (now or after registration) comes to the same check.
        let loopback = [
            "http://127.1:\(port)/hooks", "http://0x7f000001:\(port)/hooks", "http://localhost:\(port)/hooks",
        ]
        #expect(loopback.dropLast().allSatisfy { WebhookURLPolicy(allowsHTTP: true).problem(with: $0) == nil })
        // And the operator's own network and the cloud's metadata service, stored as a DNS answer would
        // give them: refused before a packet leaves.
        let refused: [(url: String, range: String)] =
            loopback.map { ($0, "loopback") } + [
                ("http://10.1.2.3:\(port)/hooks", "private"), ("http://169.254.169.254/latest/meta-data", "link-local"),
                ("http://[::ffff:127.0.0.1]:\(port)/hooks", "loopback"),
            ]
        let endpoints = try refused.enumerated().map { index, target in
            (try harness.endpoint(target.url, merchant: "m-\(index)"), target.range)
        }
        for index in refused.indices { try harness.orders(1, merchant: "m-\(index)") }
        for (endpoint, range) in endpoints {
            #expect(
                try harness.wait { try harness.store.webhookAttempts(endpointID: endpoint.id, limit: 10).count >= 2 })
            let attempts = try harness.store.webhookAttempts(endpointID: endpoint.id, limit: 10)
            #expect(attempts.allSatisfy { $0.httpStatus == nil })
            #expect(
                attempts.allSatisfy { $0.error?.hasPrefix("refused: ") == true && $0.error?.contains(range) == true },
                "\(attempts.map { $0.error ?? "" })")
        }
        #expect(receiver.records().isEmpty, "a refused address was reached")

        // A public-looking endpoint that redirects (here: allowed to loopback, to see the redirect)
        // has its 3xx counted as a failure, and the place it points to is never asked.
        let open = try Harness()
        try receiver.control(["status": 307, "location": target.url])
        let redirecting = try open.endpoint(receiver.url)
        try open.orders(1)
        #expect(try open.wait { try open.store.webhookAttempts(endpointID: redirecting.id, limit: 10).count >= 2 })
        #expect(
            try open.store.webhookAttempts(endpointID: redirecting.id, limit: 10).allSatisfy { $0.httpStatus == 307 })
        #expect(target.records().isEmpty, "a redirect was followed")
    }

    /// During a rotation the message carries both signatures: a receiver still on the old secret and
    /// one already on the new both verify; after the grace period only the new secret signs.
    @Test func rotationSignsWithBothSecretsForTheGracePeriod() throws {
        let receiver = try WebhookReceiver()
        let harness = try Harness()
        let endpoint = try harness.endpoint(receiver.url)
        let old = endpoint.secret
        let new = WebhookSecret.generate()
        var record = try #require(try harness.store.webhookEndpoint(id: endpoint.id))
        record.previousSecretSealed = record.secretSealed
        record.previousSecretExpiresAt = Date().addingTimeInterval(3600)
        record.secretSealed = try new.sealed(with: harness.sealingKey, endpointID: endpoint.id)
        try harness.store.updateWebhookEndpoint(record)

        try receiver.trust([old])
        try harness.orders(1)
        #expect(receiver.wait { $0.count == 1 })
        try receiver.trust([new.text])
        try harness.orders(1)
        #expect(receiver.wait { $0.count == 2 })
        for request in receiver.records() {
            #expect(request["verified"] as? Bool == true)
            let signatures = Self.headers(request)["webhook-signature"] ?? ""
            #expect(signatures.split(separator: " ").count == 2)
            let body = Data((request["body"] as? String ?? "").utf8)
            #expect(verifyWebhook(secret: old, headers: Self.headers(request), body: body))
            #expect(verifyWebhook(secret: new.text, headers: Self.headers(request), body: body))
        }

        record.previousSecretExpiresAt = Date().addingTimeInterval(-1)
        try harness.store.updateWebhookEndpoint(record)
        try receiver.trust([old])
        try harness.orders(1)
        #expect(receiver.wait { $0.count == 3 })
        let last = try #require(receiver.records().last)
        #expect(last["verified"] as? Bool == false, "the expired secret still signs")
        #expect(Self.headers(last)["webhook-signature"]?.split(separator: " ").count == 1)
    }
}
