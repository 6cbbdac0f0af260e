import DeliveryActivityClient
import Foundation
import TestSupport
import Testing

@Suite("Admin dashboard in a real browser", .serialized)
struct AdminDashboardTests {
    static let adminKey = "dashboard-admin-key-0123456789"
    static let failingToken = String(repeating: "ee", count: 32)

    /// The page is self-contained, and headless Chromium shows the figures of /v1/admin/stats after
    /// an admin key is entered; screenshots land in .build/test-output/ for a person to look at.
    @Test func dashboardShowsTheStats() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script([Self.failingToken: ["status": 400, "reason": "BadDeviceToken"]])
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)

        let page = try LoopbackHTTP.send(port: server.port, "GET", "/admin")
        #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(page.text.contains("/v1/admin/stats"))
        #expect(
            page.text.firstMatch(of: /(src|href)\s*=\s*["']?(https?:)?\/\//) == nil, "the page loads something external"
        )

        try workload(port: server.port, simulator: simulator)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let screenshots = root.appendingPathComponent(".build/test-output").path
        let python = root.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make test`: it creates .venv")
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"),
            "run `make test`: it installs Debian's chromium and chromium-driver")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            root.appendingPathComponent("Tests/admin-dashboard/check_dashboard.py").path,
            "--url", "http://127.0.0.1:\(server.port)", "--key", Self.adminKey, "--screenshots", screenshots,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(report)")
        #expect(report.contains("\"problems\": []"), "\(report)")
        #expect(report.contains(#""failureReasons": [["BadDeviceToken"], ["BadDeviceToken"]]"#), "\(report)")
        #expect(FileManager.default.fileExists(atPath: screenshots + "/admin-dashboard.png"))
    }

    /// Orders in several statuses and one push failure (the second order's token is refused), so the
    /// page has something to show.
    private func workload(port: UInt16, simulator: APNsSimulator) throws {
        let merchant =
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let eta = Date().addingTimeInterval(1800).formatted(.iso8601)
        for (index, status) in ["placed", "preparing", "pickup", "preparing", "delivered"].enumerated() {
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
            try CustomerApp(port: port).startLocally(
                orderId: id, activityId: "a",
                hexToken: index == 1 ? Self.failingToken : String(repeating: "ab", count: 32), environment: .production,
                credential: tracking)
            if status != "placed" {
                let bearer = status == "delivered" ? Self.adminKey : merchant
                let changed = try LoopbackHTTP.send(
                    port: port, "POST", "/v1/orders/\(id)/status", bearer: bearer, json: ["status": status])
                #expect(changed.status == 200)
            }
        }
        let deadline = Date().addingTimeInterval(10)
        while try simulator.records().count < 4, Date() < deadline { usleep(20_000) }
        let records = try simulator.records()
        try #require(records.count == 4)
        #expect(
            records.contains { $0["token"] as? String == Self.failingToken && $0["status"] as? Int == 400 },
            "\(records.map { "\($0["token"] ?? "") \($0["status"] ?? "")" })")
    }
}
