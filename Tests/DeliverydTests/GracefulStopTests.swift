import DeliveryActivityClient
import Foundation
import Synchronization
import TestScheduling
import TestSupport
import Testing

@Suite("Graceful stop under load", .serialized, .heavy)
struct GracefulStopTests {
    static let adminKey = "graceful-admin-key-0123456789"

    /// SIGTERM while customers read and a push batch waits on APNs: every answered request is whole,
    /// the process exits 0 after the batch is answered and written, and the next start sends what was
    /// still queued, so that each activity gets its push exactly once.
    @Test func stopFinishesTheBatchAndTheNextStartResumes() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script(["*": ["delay_ms": 1500]])
        let arguments =
            ["--admin-key", Self.adminKey, "--access-log", "off"] + DeliverydProcess.crowdArguments
            + simulator.deliverydArguments
        let first = try DeliverydProcess(extraArguments: arguments, keepData: true)
        defer { try? FileManager.default.removeItem(atPath: first.dataDirectory) }
        try LoopbackHTTP.waitUntilHealthy(port: first.port)
        var orders: [(id: String, token: String)] = []
        for index in 0..<10 {
            let created = try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/orders", bearer: Self.adminKey,
                json: EndToEndTests.orderBody(
                    "T-\(index)", customer: "c-\(index)", eta: Date().addingTimeInterval(1800)
                )
                .merging(["merchantId": "m-1"]) { own, _ in own })
            let id = (created.json["order"] as? [String: Any])?["id"] as? String ?? ""
            let token = String(format: "%064x", 1000 + index)
            #expect(
                try CustomerApp(port: first.port).startLocally(
                    orderId: id, activityId: "a", hexToken: token, environment: .production,
                    credential: created.json["trackingToken"] as? String ?? ""
                ).status == 200)
            orders.append((id, token))
        }

        // Customers keep reading while the service stops.
        let readers = Readers()
        let port = first.port
        let readOrder = orders[0].id
        let load = Thread {
            while !readers.stopped {
                do {
                    let response = try LoopbackHTTP.send(
                        port: port, "GET", "/v1/orders/\(readOrder)", bearer: Self.adminKey)
                    readers.record(response.status == 200 && response.json["order"] != nil)
                } catch {
                    readers.record(nil)  // refused or reset before an answer: the server was gone
                }
            }
        }
        load.start()

        for order in orders {
            #expect(
                try LoopbackHTTP.send(
                    port: first.port, "POST", "/v1/orders/\(order.id)/status", bearer: Self.adminKey,
                    json: ["status": "preparing"]
                ).status == 200)
        }
        let inFlight = Date().addingTimeInterval(10)
        while simulator.arrivals().isEmpty, Date() < inFlight { usleep(20_000) }
        let sentBeforeStop = Set(simulator.arrivals())
        try #require(!sentBeforeStop.isEmpty)
        let stopped = Date()
        first.process.terminate()
        first.process.waitUntilExit()
        readers.stop()
        load.cancel()
        #expect(first.process.terminationStatus == 0)
        #expect(Date().timeIntervalSince(stopped) < 10)
        let answered = Set(try simulator.records().compactMap { $0["token"] as? String })
        #expect(sentBeforeStop.isSubset(of: answered), "the batch in flight was answered before exit")
        #expect(readers.whole > 0 && readers.broken == 0, "whole \(readers.whole), broken \(readers.broken)")

        try simulator.script([:])
        let second = try DeliverydProcess(extraArguments: arguments, dataDirectory: first.dataDirectory, keepData: true)
        defer { _ = second.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: second.port)
        let deadline = Date().addingTimeInterval(20)
        var counts: [String: Int] = [:]
        repeat {
            usleep(200_000)
            counts = [:]
            for record in try simulator.records() where (record["payload"] as? String)?.contains("preparing") == true {
                counts[record["token"] as? String ?? "", default: 0] += 1
            }
        } while counts.count < orders.count && Date() < deadline
        #expect(Set(counts.keys) == Set(orders.map(\.token)), "every activity got its push")
        #expect(counts.values.allSatisfy { $0 == 1 }, "no push was sent twice: \(counts)")
    }
}

/// What the reading customers saw.
private final class Readers: Sendable {
    private let state = Mutex((whole: 0, broken: 0, refused: 0, stopped: false))

    var whole: Int { state.withLock { $0.whole } }
    var broken: Int { state.withLock { $0.broken } }
    var stopped: Bool { state.withLock { $0.stopped } }

    func stop() { state.withLock { $0.stopped = true } }

    /// `true` a whole answer, `false` an answer that was not, `nil` no answer at all.
    func record(_ outcome: Bool?) {
        state.withLock {
            switch outcome {
            case true?: $0.whole += 1
            case false?: $0.broken += 1
            case nil: $0.refused += 1
            }
        }
    }
}
