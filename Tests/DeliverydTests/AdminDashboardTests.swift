import DeliveryActivityClient
import Foundation
import TestScheduling
import TestSupport
import Testing

@Suite("Admin dashboard in a real browser", .serialized, .heavy)
struct AdminDashboardTests {
    static let adminKey = "dashboard-admin-key-0123456789"
    static let failingToken = String(repeating: "ee", count: 32)
    /// A development token answered `403 InvalidProviderToken`: that environment pauses.
    static let refusedToken = String(repeating: "dd", count: 32)

    /// The page is self-contained, and headless Chromium shows the figures of /v1/admin/stats after
    /// an admin key is entered: after a reload the charts still show the burst (the history is the
    /// server's), a paused environment shows its banner, a search finds an order and its timeline,
    /// and at 1,024 and 1,920 px nothing scrolls sideways. Screenshots land in .build/test-output/.
    @Test func dashboardShowsTheStats() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script([
            Self.failingToken: ["status": 400, "reason": "BadDeviceToken"],
            Self.refusedToken: ["status": 403, "reason": "InvalidProviderToken"],
        ])
        // Two merchants' webhook receivers: one gone (410: deliveryd disables it), one failing (500).
        let gone = try WebhookReceiver()
        defer { gone.stop() }
        try gone.control(["status": 410])
        let failing = try WebhookReceiver()
        defer { failing.stop() }
        try failing.control(["status": 500])
        let server = try DeliverydProcess(
            extraArguments: [
                "--admin-key", Self.adminKey, "--access-log", "off", "--history-interval", "0.5",
                "--node-name", "dashboard-node", "--webhook-urls", "local",
            ] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)

        let page = try LoopbackHTTP.send(port: server.port, "GET", "/admin")
        #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(page.text.contains("/v1/admin/stats"))
        #expect(
            page.text.firstMatch(of: /(src|href)\s*=\s*["']?(https?:)?\/\//) == nil, "the page loads something external"
        )
        let policy = page.headers["content-security-policy"] ?? ""
        #expect(policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'sha256-"))
        #expect(!policy.contains("unsafe-inline"), "\(policy)")

        for (merchant, receiver) in [("m-gone", gone), ("m-failing", failing)] {
            let key =
                try LoopbackHTTP.send(
                    port: server.port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                    json: ["role": "merchant", "merchantId": merchant]
                ).json["key"] as? String ?? ""
            let endpoint = try LoopbackHTTP.send(
                port: server.port, "POST", "/v1/webhooks", bearer: key, json: ["url": receiver.url])
            try #require(endpoint.status == 201, "\(endpoint.text)")
            try Self.order(port: server.port, merchant: key, number: "W-\(merchant)")
        }
        try workload(port: server.port, simulator: simulator)
        // Both receivers answered: one endpoint is disabled, the other failing.
        #expect(gone.wait { !$0.isEmpty } && failing.wait { !$0.isEmpty })
        let deadline = Date().addingTimeInterval(30)
        var health: [String] = []
        while Date() < deadline {
            let listed = try LoopbackHTTP.send(port: server.port, "GET", "/v1/webhooks", bearer: Self.adminKey)
            health = ((listed.json["webhooks"] as? [[String: Any]]) ?? []).compactMap { $0["health"] as? String }
                .sorted()
            if health == ["disabled", "failing"] { break }
            usleep(50_000)
        }
        #expect(health == ["disabled", "failing"])
        let report = try runCheck(
            port: server.port,
            [
                "--expect-paused", "development", "--search", "D-2", "--node", "dashboard-node", "--name",
                "admin-dashboard", "--expect-webhooks-disabled", "1",
            ])
        #expect(report.contains("\"problems\": []"), "\(report)")
        #expect(
            report.contains(
                #""failureReasons": [["BadDeviceToken", "InvalidProviderToken"], ["BadDeviceToken", "InvalidProviderToken"]]"#
            ),
            "\(report)")
        for name in ["admin-dashboard-1024", "admin-dashboard-1920", "admin-dashboard-dark", "admin-dashboard-phone"] {
            #expect(FileManager.default.fileExists(atPath: Self.screenshots + "/\(name).png"), "\(name)")
        }
    }

    /// Without an APNs key nothing reaches Apple: the page says so loudly instead of showing a
    /// green failure rate.
    @Test func logSenderIsShownAsNotSending() throws {
        let server = try DeliverydProcess(extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"])
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let report = try runCheck(port: server.port, ["--expect-log-sender", "--name", "admin-dashboard-log-sender"])
        #expect(report.contains("\"problems\": []"), "\(report)")
        #expect(FileManager.default.fileExists(atPath: Self.screenshots + "/admin-dashboard-log-sender-1024.png"))
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let screenshots = root.appendingPathComponent(".build/test-output").path

    /// Runs the browser check against a running deliveryd; its JSON report.
    private func runCheck(port: UInt16, _ arguments: [String]) throws -> String {
        let python = Self.root.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make test`: it creates .venv")
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"),
            "run `make test`: it installs Debian's chromium and chromium-driver")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments =
            [
                Self.root.appendingPathComponent("Tests/admin-dashboard/check_dashboard.py").path,
                "--url", "http://127.0.0.1:\(port)", "--key", Self.adminKey, "--screenshots", Self.screenshots,
            ] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(report)")
        return report
    }

    /// Orders in several statuses and one push failure (the second order's token is refused), so the
    /// page has something to show.
    /// An order of `merchant` without activities: one `order.status_changed` event for its endpoint.
    static func order(port: UInt16, merchant: String, number: String) throws {
        let created = try LoopbackHTTP.send(
            port: port, "POST", "/v1/orders", bearer: merchant,
            json: [
                "number": number, "merchantName": "Pizza Roma", "items": [["name": "Tea", "quantity": 1, "price": 2]],
                "customer": ["id": "c-w", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"],
                "address": "Somewhere 1", "payment": ["method": "cash"],
                "estimatedArrival": Date().addingTimeInterval(1800).formatted(.iso8601),
            ])
        try #require(created.status == 201, "\(created.text)")
    }

    private func workload(port: UInt16, simulator: APNsSimulator) throws {
        let merchant =
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let eta = Date().addingTimeInterval(1800).formatted(.iso8601)
        for (index, status) in ["placed", "preparing", "pickup", "preparing", "delivered", "preparing"].enumerated() {
            let created = try LoopbackHTTP.send(
                port: port, "POST", "/v1/orders", bearer: merchant,
                json: [
                    "number": "D-\(index)", "merchantName": "Pizza Roma",
                    "items": [["name": "Tea", "quantity": 1, "price": 2]],
                    "customer": ["id": "c-\(index)", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"],
                    "address": "Somewhere 1", "payment": ["method": "cash"], "estimatedArrival": eta,
                ])
            let order = created.json["order"] as? [String: Any]
            let id = order?["id"] as? String ?? ""
            let tracking = created.json["trackingToken"] as? String ?? ""
            // Order 1's token is dead; order 5's phone is a development build, answered with a refusal.
            let token =
                index == 1 ? Self.failingToken : index == 5 ? Self.refusedToken : String(repeating: "ab", count: 32)
            try CustomerApp(port: port).startLocally(
                orderId: id, activityId: "a", hexToken: token, environment: index == 5 ? .development : .production,
                credential: tracking)
            if status != "placed" {
                let bearer = status == "delivered" ? Self.adminKey : merchant
                let changed = try LoopbackHTTP.send(
                    port: port, "POST", "/v1/orders/\(id)/status", bearer: bearer, json: ["status": status])
                #expect(changed.status == 200)
            }
        }
        let deadline = Date().addingTimeInterval(60)
        while try simulator.records().count < 5, Date() < deadline { usleep(20_000) }
        let records = try simulator.records()
        try #require(records.count >= 5)
        #expect(
            records.contains { $0["token"] as? String == Self.failingToken && $0["status"] as? Int == 400 },
            "\(records.map { "\($0["token"] ?? "") \($0["status"] ?? "")" })")
    }
}
