import Foundation
import TestScheduling
import TestSupport
import Testing

@Suite("Pusher crash mid-batch", .serialized, .heavy)
struct CrashRecoveryTests {
    static let adminKey = "crash-admin-key-0123456789"

    /// deliveryd is killed (SIGKILL) while a batch of pushes waits on APNs; after a restart on the
    /// same data the leased rows come back and every activity gets its push: nothing is lost.
    @Test func leasedPushesComeBackAfterACrash() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["*": ["delay_ms": 4000]])
        let arguments =
            ["--admin-key", Self.adminKey, "--access-log", "off", "--push-lease", "2"] + simulator.deliverydArguments
        let first = try DeliverydProcess(extraArguments: arguments, keepData: true)
        defer { try? FileManager.default.removeItem(atPath: first.dataDirectory) }
        try LoopbackHTTP.waitUntilHealthy(port: first.port)
        let merchant =
            try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let orders = try OrderFixtures.withActivities(
            port: first.port, count: 20, bearer: merchant, numbered: "K", firstToken: 1)
        for order in orders {
            let changed = try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/orders/\(order.id)/status", bearer: merchant,
                json: ["status": "preparing"])
            try #require(changed.status == 200)
        }
        // Crash once a batch is on the wire, waiting on the simulator's 4 s delay.
        let inFlight = Date().addingTimeInterval(10)
        while simulator.arrivals().isEmpty, Date() < inFlight { usleep(20_000) }
        try #require(!simulator.arrivals().isEmpty, "no push reached the simulator")
        first.crash()
        #expect(try simulator.records().isEmpty, "no push was answered before the crash")

        try simulator.script([:])
        let second = try DeliverydProcess(extraArguments: arguments, dataDirectory: first.dataDirectory, keepData: true)
        defer { _ = second.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: second.port)
        let deadline = Date().addingTimeInterval(30)
        var pending = Set(orders.map(\.token))
        while !pending.isEmpty, Date() < deadline {
            for record in try simulator.records() where record["status"] as? Int == 200 {
                let payload = record["payload"] as? String ?? ""
                if payload.contains("\"status\":\"preparing\"") { pending.remove(record["token"] as? String ?? "") }
            }
            usleep(100_000)
        }
        #expect(pending.isEmpty, "\(pending.count) activities never got their push after the restart")
        for order in orders.prefix(3) {
            let log = try LoopbackHTTP.send(port: second.port, "GET", "/v1/orders/\(order.id)/pushes", bearer: merchant)
            let statuses = (log.json["pushes"] as? [[String: Any]] ?? []).compactMap { $0["httpStatus"] as? Int }
            #expect(statuses.contains(200), "push log of \(order.id): \(statuses)")
        }
    }
}
