import Foundation
import TestScheduling
import TestSupport
import Testing

@Suite("APNs outage", .serialized, .heavy)
struct APNsOutageTests {
    static let adminKey = "outage-admin-key-0123456789"

    /// APNs refuses connections for 10 seconds (`DELIVERYD_SOAK_OUTAGE` seconds; `make soak`: 60) while ETAs keep changing: the queue holds the changes,
    /// /metrics shows the backlog and the transport failures, and once APNs is back each activity gets
    /// one push of its newest state (the backlog drains coalesced); nothing is lost.
    @Test func backlogDrainsCoalescedAfterTheOutage() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let eta = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 + 1800)
        let orders = try OrderFixtures.withActivities(
            port: server.port, count: 5, bearer: Self.adminKey, numbered: "U", firstToken: 2000, merchantID: "m-1",
            eta: eta)

        let outage = Double(ProcessInfo.processInfo.environment["DELIVERYD_SOAK_OUTAGE"] ?? "") ?? 10
        let outageEnds = Date().addingTimeInterval(outage)
        simulator.pause()
        for step in 1...4 {
            usleep(UInt32(outage / 5 * 1_000_000))
            for order in orders {
                let moved = eta.addingTimeInterval(Double(step) * 300).formatted(.iso8601)
                #expect(
                    try LoopbackHTTP.send(
                        port: server.port, "PATCH", "/v1/orders/\(order.id)/eta", bearer: Self.adminKey,
                        json: ["estimatedArrival": moved]
                    ).status == 200)
            }
        }
        usleep(UInt32(max(0.5, outageEnds.timeIntervalSinceNow) * 1_000_000))
        let during = EndToEndTests.samples(
            try LoopbackHTTP.send(port: server.port, "GET", "/metrics", bearer: Self.adminKey).text)
        #expect((during["deliveryd_outbox_depth"] ?? 0) == Double(orders.count), "one waiting push per activity")
        #expect((during[#"deliveryd_push_failures_total{platform="ios",reason="transport"}"#] ?? 0) >= 1)

        try simulator.resume()
        let lastETA = Int(eta.addingTimeInterval(1200).timeIntervalSinceReferenceDate)
        let deadline = Date().addingTimeInterval(40 + outage)
        var delivered: [String: [String]] = [:]
        repeat {
            usleep(250_000)
            delivered = [:]
            for record in try simulator.records() where record["status"] as? Int == 200 {
                delivered[record["token"] as? String ?? "", default: []].append(record["payload"] as? String ?? "")
            }
        } while delivered.count < orders.count && Date() < deadline
        for order in orders {
            let payloads = delivered[order.token] ?? []
            #expect(payloads.count == 1, "\(order.token): \(payloads.count) pushes")
            #expect(payloads.first?.contains("\"estimatedArrival\":\(lastETA)") == true, "the newest ETA")
        }
        let after = EndToEndTests.samples(
            try LoopbackHTTP.send(port: server.port, "GET", "/metrics", bearer: Self.adminKey).text)
        #expect(after["deliveryd_outbox_depth"] == 0 && after["deliveryd_dead_letters"] == 0)
    }
}
