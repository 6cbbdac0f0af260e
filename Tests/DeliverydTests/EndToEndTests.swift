import DeliveryActivityClient
import Foundation
import TestScheduling
import TestSupport
import Testing

/// The real `deliveryd` with the APNs simulator, driven over HTTP as the apps drive it.
@Suite("End to end: from a rider's tap to the Live Activity", .serialized, .heavy)
struct EndToEndTests {
    static let adminKey = "e2e-admin-key-0123456789"
    static let startToken = String(repeating: "5", count: 64)
    static let liveToken = String(repeating: "a1", count: 32)
    static let rotatedToken = String(repeating: "a2", count: 32)
    static let deadToken = String(repeating: "d0", count: 32)
    static let badToken = String(repeating: "b0", count: 32)
    static let cancelledToken = String(repeating: "c0", count: 32)
    static let userEndedToken = String(repeating: "e0", count: 32)

    /// Orders walk every path of the state machine (repeats, a backward move, a rotation, a
    /// cancellation, a user-ended activity); each token receives exactly the expected pushes in
    /// order, ending with `end`; no push repeats a state; dead and ended tokens get nothing more;
    /// no payload carries a private field.
    @Test func ordersReachTheirLiveActivities() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script([
            Self.deadToken: ["status": 410, "reason": "Unregistered", "timestamp": 4_102_444_800_000],
            Self.badToken: ["status": 400, "reason": "BadDeviceToken"],
        ])
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--log-level", "debug"] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: simulator)

        let merchant =
            try client.call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-1"], 201)[
                "key"] as! String
        let rider =
            try client.call(
                "POST", "/v1/admin/keys", Self.adminKey, ["role": "rider", "merchantId": "m-1", "riderId": "r-1"], 201)[
                "key"]
            as! String
        // The merchant's backend mints the signed-in customer's credential; the app registers its device.
        let account =
            try client.call("POST", "/v1/customers/c-1/credentials", merchant, [:], 201)["credential"] as! String
        let app = CustomerApp(port: server.port)
        let device = try app.send(
            DeliveryAPICalls.registerPushToStart(
                customerId: "c-1", deviceId: "d-1", pushToken: CustomerApp.bytes(hex: Self.startToken),
                environment: .production, bundleId: nil, credential: account))
        try #require(device.status == 200, "\(device.text)")

        // Order A: the whole delivery path, with a push-to-start, dead tokens and a rotation.
        let eta = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 + 1800)
        let created = try client.call(
            "POST", "/v1/orders", merchant, Self.orderBody("A-1", customer: "c-1", eta: eta), 201)
        let orderA = (created["order"] as! [String: Any])["id"] as! String
        let trackingA = created["trackingToken"] as! String
        try client.waitForPushes(1)
        for (activity, token, environment) in [
            ("a-live", Self.liveToken, APNsEnvironment.development), ("a-dead", Self.deadToken, .production),
            ("a-bad", Self.badToken, .development),
        ] {
            let registered = try app.startLocally(
                orderId: orderA, activityId: activity, hexToken: token, environment: environment,
                credential: trackingA)
            try #require(registered.status == 200, "\(registered.text)")
        }
        // Each registration queued a push of the current state (already shown: not sent). Let the
        // pushers be done with them, so that the pushes counted next are the change's own.
        try client.waitForEmptyOutbox(adminKey: Self.adminKey)
        let status = "/v1/orders/\(orderA)/status"
        try client.step("POST", status, merchant, ["status": "preparing"], expectPushes: 4)
        try client.step("POST", status, merchant, ["status": "preparing"], expectPushes: 4, transition: "unchanged")
        try client.step(
            "PUT", "/v1/orders/\(orderA)/rider", merchant,
            ["riderId": "r-1", "name": "Marco Rossi", "phone": "+39 333 7654321"], expectPushes: 5)
        try client.step("POST", status, rider, ["status": "pickup"], expectPushes: 6)
        let backward = try client.send("POST", status, merchant, ["status": "preparing"])
        #expect(
            backward.status == 409
                && (backward.json["error"] as? [String: Any])?["code"] as? String == "illegal_transition")
        let etaPath = "/v1/orders/\(orderA)/eta"
        try client.step(
            "PATCH", etaPath, rider, ["estimatedArrival": Self.rfc3339(eta.addingTimeInterval(600))], expectPushes: 7)
        // 20 seconds later rounds to the same minute: stored, but the projected state is the same.
        try client.step(
            "PATCH", etaPath, rider, ["estimatedArrival": Self.rfc3339(eta.addingTimeInterval(620))], expectPushes: 7)
        try client.call(
            "PUT", "/v1/orders/\(orderA)/activities/a-live", trackingA,
            ["pushToken": Self.rotatedToken, "environment": "development"], 200)
        // The rotated token queued a push of the current state, nothing new, so not sent. Let the pusher
        // be done with it first: had it read the order after `delivering` committed, that row would carry
        // the new state under the PUT's request id, and `delivering`'s own row would repeat it (not sent).
        try client.waitForEmptyOutbox(adminKey: Self.adminKey)
        let delivering = try client.send("POST", status, rider, ["status": "delivering"])
        #expect(delivering.status == 200)
        try client.waitForPushes(8)
        try client.step("POST", status, rider, ["status": "delivered"], expectPushes: 9)
        try client.step("POST", status, rider, ["status": "delivered"], expectPushes: 9, transition: "unchanged")
        let late = try client.send(
            "PUT", "/v1/orders/\(orderA)/activities/a-late", trackingA,
            ["pushToken": Self.liveToken, "environment": "development"])
        #expect(late.status == 409 && (late.json["error"] as? [String: Any])?["code"] as? String == "order_closed")

        // Order B: cancelled while being prepared.
        let createdB = try client.call(
            "POST", "/v1/orders", merchant, Self.orderBody("B-1", customer: "c-2", eta: eta), 201)
        let orderB = (createdB["order"] as! [String: Any])["id"] as! String
        try app.startLocally(
            orderId: orderB, activityId: "b-live", hexToken: Self.cancelledToken, environment: .production,
            credential: createdB["trackingToken"] as! String)
        try client.step("POST", "/v1/orders/\(orderB)/status", merchant, ["status": "cancelled"], expectPushes: 10)
        let reopened = try client.send("POST", "/v1/orders/\(orderB)/status", Self.adminKey, ["status": "delivered"])
        #expect(
            reopened.status == 409 && (reopened.json["error"] as? [String: Any])?["code"] as? String == "order_closed")

        // Order C: the user ended the activity before anything happened.
        let createdC = try client.call(
            "POST", "/v1/orders", merchant, Self.orderBody("C-1", customer: "c-3", eta: eta), 201)
        let orderC = (createdC["order"] as! [String: Any])["id"] as! String
        let trackingC = createdC["trackingToken"] as! String
        try app.startLocally(
            orderId: orderC, activityId: "c-live", hexToken: Self.userEndedToken, environment: .production,
            credential: trackingC)
        #expect(try client.send("DELETE", "/v1/orders/\(orderC)/activities/c-live", trackingC).status == 204)
        try client.step("POST", "/v1/orders/\(orderC)/status", merchant, ["status": "preparing"], expectPushes: 10)

        let records = try simulator.records()
        func pushes(_ token: String) -> [String] {
            records.filter { $0["token"] as? String == token }.map(Self.summary)
        }
        #expect(pushes(Self.startToken) == ["start placed"])
        #expect(
            pushes(Self.liveToken) == [
                "update preparing", "update preparing rider=Marco", "update pickup rider=Marco",
                "update pickup rider=Marco",
            ])
        #expect(pushes(Self.rotatedToken) == ["update delivering rider=Marco", "end delivered rider=Marco"])
        #expect(pushes(Self.deadToken) == ["update preparing"])
        #expect(pushes(Self.badToken) == ["update preparing"])
        #expect(pushes(Self.cancelledToken) == ["end cancelled"])
        #expect(pushes(Self.userEndedToken).isEmpty)

        // One activity across its rotation: states never repeat, timestamps never go back.
        let chain = records.filter { [Self.liveToken, Self.rotatedToken].contains($0["token"] as? String) }
        let states = chain.map { Self.aps($0)["content-state"] as? [String: Any] ?? [:] }
        for (previous, next) in zip(states, states.dropFirst()) {
            #expect(!NSDictionary(dictionary: previous).isEqual(to: next), "a state was pushed twice")
        }
        let timestamps = chain.compactMap { Self.aps($0)["timestamp"] as? Int }
        #expect(timestamps == timestamps.sorted() && timestamps.count == chain.count)
        let priorities = chain.map { ($0["headers"] as? [String: String])?["apns-priority"] ?? "" }
        #expect(priorities == ["5", "5", "10", "5", "10", "10"])
        let start = Self.aps(records.first { $0["token"] as? String == Self.startToken } ?? [:])
        #expect(start["attributes-type"] as? String == "DeliveryAttributes")
        #expect((start["alert"] as? [String: Any]) != nil)

        for record in records {
            let text = PayloadText.strings(inJSON: record["payload"] as? String ?? "")
            for secret in ["1234567", "7654321", "Hauptstr", "10115", "4242", "visa", "ring twice", "Rossi", "Ana"] {
                #expect(!text.contains { $0.contains(secret) }, "a payload carries \(secret)")
            }
        }

        let log =
            try client.call("GET", "/v1/orders/\(orderA)/pushes", merchant, nil, 200)["pushes"] as? [[String: Any]]
            ?? []
        #expect(log.count == 9)
        #expect(log.compactMap { $0["httpStatus"] as? Int }.sorted() == [200, 200, 200, 200, 200, 200, 200, 400, 410])

        // The request id of the rider's `delivering` ties its access-log line to the push it caused.
        let requestID = try #require(delivering.headers["x-request-id"])
        #expect(log.contains { $0["requestId"] as? String == requestID && $0["event"] as? String == "update" })

        try checkMetrics(client: client, simulatorRecords: records.count)

        #expect(server.stop() == 0)
        let lines = server.logLines()
        #expect(
            lines.contains { $0["message"] as? String == "http.request" && $0["request.id"] as? String == requestID })
        #expect(
            lines.contains { $0["message"] as? String == "push.accepted" && $0["request.id"] as? String == requestID })
        // No line of the whole run carries a private field, a token in full, or a key.
        let text = server.standardError()
        #expect(lines.count > 30 && text.split(separator: "\n").count == lines.count)
        // Short numbers are matched with their context: "4242" or "10115" alone also turn up by chance
        // in a port, a duration or a random id, which made this check fail now and then.
        let secrets = [
            "1234567", "7654321", "Hauptstr", "10115 Berlin", "\"4242\"", "visa", "ring twice", "Rossi", "Ana\"",
            Self.adminKey,
            merchant, rider, trackingA, Self.liveToken, Self.rotatedToken, Self.deadToken, Self.startToken,
        ]
        for secret in secrets {
            #expect(!text.contains(secret), "a log line carries \(secret.prefix(12))…")
        }
    }

    /// `/metrics` after the workload above: exact counts, and a format promtool accepts.
    private func checkMetrics(client: Client, simulatorRecords: Int) throws {
        let response = try LoopbackHTTP.send(port: client.port, "GET", "/metrics", bearer: Self.adminKey)
        #expect(
            response.status == 200 && response.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let metrics = Self.samples(response.text)
        let expected: [String: Double] = [
            "deliveryd_orders_created_total": 3,
            #"deliveryd_order_transitions_total{from="placed",to="preparing"}"#: 2,
            #"deliveryd_order_transitions_total{from="preparing",to="pickup"}"#: 1,
            #"deliveryd_order_transitions_total{from="pickup",to="delivering"}"#: 1,
            #"deliveryd_order_transitions_total{from="delivering",to="delivered"}"#: 1,
            #"deliveryd_order_transitions_total{from="placed",to="cancelled"}"#: 1,
            #"deliveryd_orders{status="delivered"}"#: 1, #"deliveryd_orders{status="cancelled"}"#: 1,
            #"deliveryd_orders{status="preparing"}"#: 1, #"deliveryd_orders{status="placed"}"#: 0,
            #"deliveryd_pushes_total{platform="ios",event="start",result="accepted"}"#: 1,
            #"deliveryd_pushes_total{platform="ios",event="update",result="accepted"}"#: 5,
            #"deliveryd_pushes_total{platform="ios",event="end",result="accepted"}"#: 2,
            #"deliveryd_pushes_total{platform="ios",event="update",result="token_removed"}"#: 2,
            #"deliveryd_push_failures_total{platform="ios",reason="Unregistered"}"#: 1,
            #"deliveryd_push_failures_total{platform="ios",reason="BadDeviceToken"}"#: 1,
            #"deliveryd_tokens_removed_total{reason="Unregistered"}"#: 1,
            #"deliveryd_tokens_removed_total{reason="BadDeviceToken"}"#: 1,
            "deliveryd_push_retries_total": 0,
            #"deliveryd_live_activity_events_total{event="registered"}"#: 5,
            #"deliveryd_live_activity_events_total{event="token_rotated"}"#: 1,
            #"deliveryd_live_activity_events_total{event="started_remotely"}"#: 1,
            #"deliveryd_live_activity_events_total{event="updated"}"#: 5,
            #"deliveryd_live_activity_events_total{event="ended"}"#: 2,
            #"deliveryd_live_activity_events_total{event="removed_by_system"}"#: 2,
            #"deliveryd_live_activity_events_total{event="removed_by_user"}"#: 1,
            "deliveryd_push_latency_seconds_count": Double(simulatorRecords),
            "deliveryd_apns_request_duration_seconds_count": Double(simulatorRecords),
            #"deliveryd_http_requests_total{method="POST",route="/v1/orders/{id}/status",status="200"}"#: 8,
            #"deliveryd_http_requests_total{method="POST",route="/v1/orders/{id}/status",status="409"}"#: 2,
            #"deliveryd_http_requests_total{method="POST",route="/v1/orders",status="201"}"#: 3,
            "deliveryd_outbox_depth": 0, "deliveryd_dead_letters": 0,
        ]
        for (series, value) in expected {
            #expect(metrics[series] == value, "\(series) is \(metrics[series].map { "\($0)" } ?? "missing")")
        }
        #expect((metrics["deliveryd_process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((metrics["deliveryd_process_open_fds"] ?? 0) > 3)
        #expect((metrics["deliveryd_http_open_connections"] ?? 0) >= 1)
        // The build, as `deliveryd --version` names it (an unstamped test build: commit and day unknown).
        #expect(
            metrics.keys.contains {
                $0.hasPrefix("deliveryd_build_info{version=\"0.") && $0.contains("commit=\"unknown\",built=\"unknown\"")
            })
        #expect(!response.text.contains("o_") && !response.text.contains(Self.liveToken))

        let file = NSTemporaryDirectory() + "metrics-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try response.body.write(to: URL(fileURLWithPath: file))
        let promtool = Process()
        promtool.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        promtool.arguments = ["check", "metrics"]
        promtool.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        let problems = Pipe()
        promtool.standardOutput = problems
        promtool.standardError = problems
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"),
            "promtool is missing: `make test` installs Debian's prometheus package")
        try promtool.run()
        let report = String(decoding: problems.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        promtool.waitUntilExit()
        #expect(promtool.terminationStatus == 0, "promtool check metrics: \(report)")
        #expect(report.isEmpty, "promtool lint: \(report)")
    }

    /// `series → value` of an exposition, series written as in the text (`name{labels}`).
    static func samples(_ text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            samples[String(line[..<space])] = Double(line[line.index(after: space)...])
        }
        return samples
    }

    static func orderBody(_ number: String, customer: String, eta: Date) -> [String: Any] {
        [
            "number": number, "merchantName": "Pizza Roma",
            "items": [["name": "Margherita", "quantity": 2, "price": 8.5]],
            "customer": ["id": customer, "name": "Ana", "phone": "+49 30 1234567", "locale": "en"],
            "address": "Hauptstr. 1, 10115 Berlin", "payment": ["method": "card", "brand": "visa", "last4": "4242"],
            "estimatedArrival": rfc3339(eta), "note": "ring twice",
        ]
    }

    static func rfc3339(_ date: Date) -> String { date.formatted(.iso8601) }

    static func aps(_ record: [String: Any]) -> [String: Any] {
        let payload = Data((record["payload"] as? String ?? "{}").utf8)
        let object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any]
        return object?["aps"] as? [String: Any] ?? [:]
    }

    /// `event status[ rider=Name]` of one recorded push.
    static func summary(_ record: [String: Any]) -> String {
        let aps = aps(record)
        let state = aps["content-state"] as? [String: Any] ?? [:]
        var text = "\(aps["event"] as? String ?? "?") \(state["status"] as? String ?? "?")"
        if let rider = state["riderName"] as? String { text += " rider=\(rider)" }
        return text
    }
}

/// Requests to the server under test and waits on the simulator's record.
struct Client {
    let port: UInt16
    let simulator: APNsSimulator

    func send(_ method: String, _ path: String, _ bearer: String, _ body: [String: Any]? = nil) throws
        -> LoopbackHTTP.Response
    {
        try LoopbackHTTP.send(port: port, method, path, bearer: bearer, json: body)
    }

    /// Waits until no push is waiting or in flight (`deliveryd_outbox_depth` 0).
    func waitForEmptyOutbox(adminKey: String) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let metrics = try LoopbackHTTP.send(port: port, "GET", "/metrics", bearer: adminKey)
            if EndToEndTests.samples(metrics.text)["deliveryd_outbox_depth"] == 0 { return }
            usleep(10_000)
        }
        Issue.record("pushes were still waiting after 10 s")
    }

    /// Sends a request that must answer `status`; returns its JSON body.
    @discardableResult
    func call(_ method: String, _ path: String, _ bearer: String, _ body: [String: Any]?, _ status: Int) throws
        -> [String: Any]
    {
        let response = try send(method, path, bearer, body)
        try #require(response.status == status, "\(method) \(path): \(response.status) \(response.text)")
        return response.json
    }

    /// A change that must answer 200 with `transition`, after which the simulator holds exactly
    /// `expectPushes` requests.
    func step(
        _ method: String, _ path: String, _ bearer: String, _ body: [String: Any], expectPushes: Int,
        transition: String = "applied"
    ) throws {
        let answer = try call(method, path, bearer, body, 200)
        #expect(answer["transition"] as? String == transition, "\(method) \(path) \(body)")
        try waitForPushes(expectPushes)
    }

    /// Waits until the simulator has `count` requests, then a little longer to catch any extra one.
    func waitForPushes(_ count: Int) throws {
        let deadline = Date().addingTimeInterval(10)
        while try simulator.records().count < count, Date() < deadline { usleep(10_000) }
        usleep(300_000)
        let seen = try simulator.records().count
        try #require(seen == count, "the simulator has \(seen) pushes, expected \(count)")
    }
}
