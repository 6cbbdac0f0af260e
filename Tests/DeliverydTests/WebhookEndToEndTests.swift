import Foundation
import TestScheduling
import TestSupport
import Testing

/// The running service with its webhooks: a merchant's endpoint registered over the API, APNs played
/// by the simulator, the merchant's receiver by Tests/webhook-receiver (verifying every delivery with
/// the reference `standardwebhooks` library).
@Suite("Webhooks end to end", .serialized, .heavy)
struct WebhookEndToEndTests {
    static let adminKey = "webhook-e2e-admin-key-0123"
    static let goodToken = String(repeating: "a1", count: 32)
    static let deadToken = String(repeating: "d2", count: 32)
    static let badToken = String(repeating: "b3", count: 32)
    static let lastToken = String(repeating: "c4", count: 32)
    static let startToken = String(repeating: "5a", count: 32)
    static let tabletToken = String(repeating: "6b", count: 32)

    /// Test scaffolding: the service, a merchant key and its endpoint.
    struct Setup {
        let server: DeliverydProcess
        let client: Client
        let merchant: String
        let endpointID: String

        init(
            simulator: APNsSimulator, receiver: WebhookReceiver, extraArguments: [String] = [],
            dataDirectory: String? = nil
        ) throws {
            server = try DeliverydProcess(
                extraArguments: [
                    "--admin-key", WebhookEndToEndTests.adminKey, "--webhook-urls", "local", "--dismissal-delay", "0",
                ] + extraArguments + DeliverydProcess.crowdArguments + simulator.deliverydArguments,
                dataDirectory: dataDirectory, keepData: dataDirectory != nil)
            try LoopbackHTTP.waitUntilHealthy(port: server.port)
            client = Client(port: server.port, simulator: simulator)
            merchant =
                try client.call(
                    "POST", "/v1/admin/keys", WebhookEndToEndTests.adminKey,
                    ["role": "merchant", "merchantId": "m-1"], 201)["key"] as? String ?? ""
            let endpoint = try client.call("POST", "/v1/webhooks", merchant, ["url": receiver.url], 201)
            endpointID = endpoint["id"] as? String ?? ""
            try receiver.trust([endpoint["secret"] as? String ?? ""])
        }

        /// Creates an order due in 20 minutes; returns its id and tracking token.
        func order(_ number: String) throws -> (id: String, token: String) {
            let created = try client.call(
                "POST", "/v1/orders", merchant,
                EndToEndTests.orderBody(number, customer: "c-42", eta: Date().addingTimeInterval(1200)), 201)
            return (
                (created["order"] as? [String: Any])?["id"] as? String ?? "", created["trackingToken"] as? String ?? ""
            )
        }
    }

    /// `type` and what tells events of one type apart, for every delivery the receiver answered 200.
    static func delivered(_ receiver: WebhookReceiver) -> [String] {
        receiver.records().filter { $0["status"] as? Int == 200 }.map { record in
            let body =
                (try? JSONSerialization.jsonObject(with: Data((record["body"] as? String ?? "").utf8)))
                as? [String: Any] ?? [:]
            let data = body["data"] as? [String: Any] ?? [:]
            let detail = ["status", "activityId", "deviceId", "reason", "apnsReason", "kind"].compactMap { key in
                data[key].flatMap { $0 as? String }.map { "\(key)=\($0)" }
            }
            return ([body["type"] as? String ?? "?"] + detail).joined(separator: " ")
        }
    }

    /// Each kind of event the running service makes arrives once, verified.
    @Test func everyEventArrivesOnceAndVerifies() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        try simulator.script([
            Self.deadToken: ["status": 410, "reason": "Unregistered"],
            Self.badToken: ["status": 400, "reason": "BadDeviceToken"],
        ])
        let setup = try Setup(
            simulator: simulator, receiver: receiver, extraArguments: ["--start-registration-timeout", "10"])
        defer { _ = setup.server.stop() }
        let client = setup.client
        let account = try client.call("POST", "/v1/customers/c-42/credentials", setup.merchant, [:], 201)
        let credential = account["credential"] as? String ?? ""
        for (device, token) in [("iphone", Self.startToken), ("ipad", Self.tabletToken)] {
            try client.call(
                "PUT", "/v1/customers/c-42/push-to-start/\(device)", credential,
                ["pushToken": token, "environment": "production"], 200)
        }
        try client.call("DELETE", "/v1/customers/c-42/push-to-start/ipad", credential, nil, 204)

        // An order whose push-to-start the phone never answers with an activity: it stalls 10 s on.
        let unanswered = try setup.order("W-0")
        let order = try setup.order("W-1")
        let activities = [
            ("a-1", Self.goodToken, "production"), ("a-2", Self.deadToken, "production"),
            ("a-3", Self.badToken, "development"),
        ]
        for (activity, token, environment) in activities {
            try client.call(
                "PUT", "/v1/orders/\(order.id)/activities/\(activity)", order.token,
                ["pushToken": token, "environment": environment], 200)
        }
        // The registrations' pushes: a-2's token is dead, a-3's refused in an environment not yet
        // confirmed (a dead letter); then a-3's token is fixed (a new install) and works from now on.
        #expect(
            receiver.wait { _ in
                let seen = Self.delivered(receiver)
                return seen.contains { $0.hasPrefix("push.dead_lettered") }
                    && seen.contains { $0.hasPrefix("activity.ended activityId=a-2") }
            })
        try simulator.script([Self.deadToken: ["status": 410, "reason": "Unregistered"]])
        try client.call("POST", "/v1/orders/\(order.id)/status", setup.merchant, ["status": "preparing"], 200)
        // The same change again is no change: nothing more is told.
        try client.call("POST", "/v1/orders/\(order.id)/status", setup.merchant, ["status": "preparing"], 200)
        try client.call("DELETE", "/v1/orders/\(order.id)/activities/a-1", order.token, nil, 204)
        try client.call(
            "PUT", "/v1/orders/\(order.id)/activities/a-4", order.token,
            ["pushToken": Self.lastToken, "environment": "production"], 200)
        try client.call("POST", "/v1/orders/\(order.id)/status", setup.merchant, ["status": "cancelled"], 200)

        let expected = [
            "push_to_start.removed deviceId=ipad reason=signed_out",
            "order.status_changed status=placed", "order.status_changed status=placed",
            "activity.start_stalled deviceId=iphone",
            "activity.started activityId=a-1", "activity.started activityId=a-2", "activity.started activityId=a-3",
            "activity.ended activityId=a-2 reason=token_dead apnsReason=Unregistered",
            "push.dead_lettered activityId=a-3 reason=BadDeviceToken kind=update",
            "order.status_changed status=preparing",
            "activity.ended activityId=a-1 reason=user_dismissed",
            "activity.started activityId=a-4",
            "order.status_changed status=cancelled",
            "activity.ended activityId=a-3 reason=order_ended",
            "activity.ended activityId=a-4 reason=order_ended",
        ]
        #expect(receiver.wait { _ in Self.delivered(receiver).count >= expected.count })
        usleep(1_500_000)  // anything extra would have arrived by now
        #expect(Self.delivered(receiver).sorted() == expected.sorted())
        let stalled = receiver.events().first { $0["type"] as? String == "activity.start_stalled" }
        #expect((stalled?["data"] as? [String: Any])?["orderId"] as? String == unanswered.id)
        let records = receiver.records()
        #expect(records.allSatisfy { $0["verified"] as? Bool == true }, "a delivery did not verify")
        let ids = records.compactMap { ($0["headers"] as? [String: String])?["webhook-id"] }
        #expect(Set(ids).count == ids.count, "an event was delivered twice")
        let shown = try client.call("GET", "/v1/webhooks/\(setup.endpointID)", setup.merchant, nil, 200)
        #expect(shown["health"] as? String == "delivering")
        #expect((shown["deliveries"] as? [String: Any])?["delivered"] as? Int == expected.count)
        let metrics = try client.send("GET", "/metrics", Self.adminKey).text
        #expect(metrics.contains("deliveryd_webhook_attempts_total{result=\"delivered\"} \(expected.count)\n"))
    }

    /// Changes acknowledged while the receiver is down survive `kill -9`: after a restart every event
    /// reaches the receiver.
    @Test func killNineLosesNoEvent() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let data = NSTemporaryDirectory() + "webhook-kill-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: data) }
        // Short attempts: what the killed process held is leased for twice the attempt timeout and 10 s.
        let schedule = [
            "--webhook-retry-schedule", Array(repeating: "0.5", count: 40).joined(separator: ","), "--webhook-timeout",
            "2",
        ]
        try receiver.control(["status": 503])
        let first = try Setup(simulator: simulator, receiver: receiver, extraArguments: schedule, dataDirectory: data)
        let orders = try (1...20).map { try first.order("K-\($0)").id }
        #expect(receiver.wait { $0.count >= 20 }, "the receiver was not tried")
        first.server.crash()

        try receiver.control(["status": 200])
        let second = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--webhook-urls", "local"] + schedule
                + simulator.deliverydArguments,
            dataDirectory: data, keepData: true)
        defer { _ = second.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: second.port)
        func placed() -> Set<String> {
            Set(
                receiver.records().filter { $0["status"] as? Int == 200 }.compactMap { record in
                    let body = try? JSONSerialization.jsonObject(with: Data((record["body"] as? String ?? "").utf8))
                    return ((body as? [String: Any])?["data"] as? [String: Any])?["orderId"] as? String
                })
        }
        #expect(receiver.wait(timeout: 60) { _ in Set(orders).isSubset(of: placed()) })
        let delivered = receiver.records().filter { $0["status"] as? Int == 200 }
        #expect(delivered.count == 20, "each event delivered once: \(delivered.count)")
        #expect(delivered.allSatisfy { $0["verified"] as? Bool == true })
    }

    /// A receiver that hangs holds its webhooks, not the pushes: every push of a run of ETA changes
    /// reaches APNs while not one webhook attempt to it has finished. The push latency of the run is
    /// printed beside that of a run with a healthy receiver.
    @Test func aHangingReceiverDoesNotDelayPushes() throws {
        var latencies: [String: [Double]] = [:]
        for hanging in [false, true] {
            let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
            defer { simulator.stop() }
            let receiver = try WebhookReceiver()
            defer { receiver.stop() }
            if hanging { try receiver.control(["hang_seconds": 120]) }
            let setup = try Setup(
                simulator: simulator, receiver: receiver, extraArguments: ["--webhook-timeout", "60"])
            defer { _ = setup.server.stop() }
            let order = try setup.order("H-1")
            try setup.client.call(
                "PUT", "/v1/orders/\(order.id)/activities/a-1", order.token,
                ["pushToken": Self.goodToken, "environment": "production"], 200)
            try setup.client.waitForPushes(1)
            var measured: [Double] = []
            for change in 1...20 {
                let sent = Date()
                try setup.client.call(
                    "PATCH", "/v1/orders/\(order.id)/eta", setup.merchant,
                    ["estimatedArrival": EndToEndTests.rfc3339(sent.addingTimeInterval(Double(1200 + change * 60)))],
                    200)
                try setup.client.waitForPushes(1 + change)
                let arrived = try simulator.records().last?["received_at"] as? Double ?? 0
                measured.append(arrived - sent.timeIntervalSince1970)
            }
            latencies[hanging ? "hanging" : "healthy"] = measured.sorted()
            if hanging {
                #expect(receiver.records().count >= 1, "the hanging receiver was reached")
                let attempts = try setup.client.call(
                    "GET", "/v1/webhooks/\(setup.endpointID)/attempts", setup.merchant, nil, 200)
                #expect(
                    (attempts["attempts"] as? [Any])?.isEmpty == true,
                    "a webhook attempt finished: the receiver did not hang the whole run")
            }
        }
        for (name, values) in latencies.sorted(by: { $0.key < $1.key }) {
            print(
                "push latency with a \(name) webhook receiver: median \(Int(values[values.count / 2] * 1000)) ms,"
                    + " max \(Int((values.last ?? 0) * 1000)) ms over \(values.count) ETA changes")
        }
    }
}
