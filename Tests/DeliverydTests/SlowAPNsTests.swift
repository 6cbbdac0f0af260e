import Foundation
import TestScheduling
import TestSupport
import Testing

@Suite("Slow APNs", .serialized, .heavy)
struct SlowAPNsTests {
    static let adminKey = "slow-admin-key-0123456789"

    /// APNs takes 3 s to answer each push: status changes are still answered at once (the API never
    /// waits on APNs: a push in flight holds no request thread and no database lock), and every push
    /// arrives once APNs answers. (How much the API's p99 moves is measured by `bench/e2e.sh`.)
    @Test func apiDoesNotWaitOnAPNs() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["*": ["delay_ms": 3000]])
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let orders = try OrderFixtures.withActivities(
            port: server.port, count: 20, bearer: Self.adminKey, numbered: "S", firstToken: 3000, merchantID: "m-1")
        var slowest = 0.0
        for status in ["preparing", "pickup"] {
            for order in orders {
                let started = Date()
                let changed = try LoopbackHTTP.send(
                    port: server.port, "POST", "/v1/orders/\(order.id)/status", bearer: Self.adminKey,
                    json: ["status": status])
                slowest = max(slowest, Date().timeIntervalSince(started))
                #expect(changed.status == 200)
            }
        }
        // Far below the 3 s an APNs answer takes: no request waited for one.
        #expect(slowest < 1.5, "slowest status change took \(slowest) s")
        #expect(!simulator.arrivals().isEmpty, "pushes were in flight meanwhile")

        let deadline = Date().addingTimeInterval(40)
        var newest: [String: String] = [:]
        repeat {
            usleep(250_000)
            newest = [:]
            for record in try simulator.records() where record["status"] as? Int == 200 {
                let state = EndToEndTests.aps(record)["content-state"] as? [String: Any]
                newest[record["token"] as? String ?? ""] = state?["status"] as? String
            }
        } while newest.values.filter({ $0 == "pickup" }).count < orders.count && Date() < deadline
        for order in orders {
            #expect(newest[order.token] == "pickup", "\(order.token): \(newest[order.token] ?? "none")")
        }
    }
}
