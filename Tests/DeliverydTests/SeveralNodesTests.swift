import Foundation
import TestSupport
import Testing

extension KillUnderLoad {
    /// Several deliveryd nodes on one PostgreSQL database, requests spread over them, nodes killed with
    /// `kill -9` mid-run and started again: what each activity is pushed is what one node would push.
    @Suite("Several nodes on PostgreSQL", .serialized)
    struct SeveralNodesTests {
        static let adminKey = "several-nodes-admin-key-0123"

        @Test func twoNodesShareThePushesAndSurviveAKill() throws {
            let shared = try SharedByNodes(adminKey: Self.adminKey, extra: ["--push-lease", "2"])
            defer { shared.stop() }
            let (simulator, arguments) = (shared.simulator, shared.arguments)
            var nodes = try (0..<2).map { _ in try DeliverydProcess(extraArguments: arguments) }
            defer { for node in nodes { _ = node.stop() } }
            for node in nodes { try node.waitUntilHealthy() }
            let merchant =
                try LoopbackHTTP.send(
                    port: nodes[1].port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                    json: ["role": "merchant", "merchantId": "m-1"]
                ).json["key"] as? String ?? ""
            let orders = try OrderFixtures.withActivities(
                port: nodes[0].port, count: 10, bearer: merchant, numbered: "N", firstToken: 500)

            // Each change (as an admin, who may set every status) goes to one node or the other; node 1 is killed after the second status and
            // started again (on the same port, as behind a load balancer) before the last one.
            let statuses = ["preparing", "pickup", "delivering", "delivered"]
            for (step, status) in statuses.enumerated() {
                if step == 2 {
                    nodes[1].crash()
                }
                if step == 3 {
                    nodes[1] = try DeliverydProcess(extraArguments: arguments, port: nodes[1].port)
                    try nodes[1].waitUntilHealthy()
                }
                for (index, order) in orders.enumerated() {
                    let node = step == 2 ? nodes[0] : nodes[(index + step) % 2]
                    let changed = try LoopbackHTTP.send(
                        port: node.port, "POST", "/v1/orders/\(order.id)/status", bearer: Self.adminKey,
                        json: ["status": status])
                    try #require(
                        changed.status == 200, "\(status) of \(order.id) on port \(node.port): \(changed.text)")
                }
            }

            // Every change reads back from both nodes.
            for node in nodes {
                for order in orders {
                    let read = try LoopbackHTTP.send(port: node.port, "GET", "/v1/orders/\(order.id)", bearer: merchant)
                    #expect((read.json["order"] as? [String: Any])?["status"] as? String == "delivered")
                }
            }

            // Every activity ends, delivered; what it is pushed never goes back, in state or timestamp.
            let stages = ["placed": 0, "preparing": 1, "pickup": 2, "delivering": 3, "delivered": 4]
            let deadline = Date().addingTimeInterval(30)
            var ended: Set<String> = []
            while ended.count < orders.count, Date() < deadline {
                ended = Set(
                    try simulator.records().filter {
                        $0["status"] as? Int == 200 && ($0["payload"] as? String ?? "").contains(#""event":"end""#)
                    }.compactMap { $0["token"] as? String })
                usleep(100_000)
            }
            #expect(ended == Set(orders.map(\.token)), "\(orders.count - ended.count) activities never ended")
            for order in orders {
                let pushes = try simulator.records().filter {
                    $0["token"] as? String == order.token && $0["status"] as? Int == 200
                }
                .compactMap { record -> (stage: Int, timestamp: Int, event: String)? in
                    guard let text = record["payload"] as? String,
                        let payload = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                        let aps = payload["aps"] as? [String: Any],
                        let state = aps["content-state"] as? [String: Any],
                        let stage = stages[state["status"] as? String ?? ""]
                    else { return nil }
                    return (stage, aps["timestamp"] as? Int ?? 0, aps["event"] as? String ?? "")
                }
                #expect(pushes.last?.event == "end" && pushes.last?.stage == 4, "\(order.id): \(pushes)")
                #expect(
                    zip(pushes, pushes.dropFirst()).allSatisfy { $0.stage <= $1.stage },
                    "\(order.id) went back: \(pushes)")
                #expect(
                    zip(pushes, pushes.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp },
                    "\(order.id)'s timestamps did not grow: \(pushes)")
            }
        }

        /// Three nodes, four rider threads sending each change to a node picked at random (another one
        /// when it fails, as a load balancer retries), and a node picked at random killed with `kill -9`
        /// at random moments and started again on its port. Every acknowledged change reads back from
        /// every node after each kill and at the end; every activity gets its final state and `end`, with
        /// timestamps that never go back and a state pushed twice only where a kill explains it.
        ///
        /// The kills are paced by the acknowledged changes (`LoadPacer`), not the clock. The push lease is
        /// the default (30 s): the pushes a killed node held are sent by another node once it expires.
        @Test func threeNodesSurviveRandomKills() throws {
            let kills = 6
            let orderCount = 240
            let totalChanges = orderCount * RandomKillTests.path.count
            let shared = try SharedByNodes(adminKey: Self.adminKey, extra: ["--access-log", "off"])
            defer { shared.stop() }
            let (simulator, arguments) = (shared.simulator, shared.arguments)
            var nodes = try (0..<3).map { _ in try DeliverydProcess(extraArguments: arguments) }
            defer { for node in nodes { _ = node.stop() } }
            let ports = nodes.map(\.port)
            for node in nodes { try node.waitUntilHealthy() }
            let load = try RidingLoad(
                ports: ports, adminKey: Self.adminKey, orderCount: orderCount, numbered: "T", firstToken: 0x7000,
                kills: kills)
            let (merchant, orders, pacer, acknowledged, riders) =
                (load.merchant, load.orders, load.pacer, load.acknowledged, load.riders)

            var killedAt: [Double] = []
            var victims: [Int] = []
            let changesAtKills = try pacer.killDuring(riders) { _ in
                let victim = Int.random(in: 0..<3)
                victims.append(victim)
                nodes[victim].crash()
                killedAt.append(Date().timeIntervalSince1970)
                // The survivors hold every acknowledged change while the victim is down.
                let promised = acknowledged.snapshot
                for port in ports.indices where port != victim {
                    try RandomKillTests.expectAcknowledged(promised, readFrom: ports[port], merchant: merchant)
                }
                _ = nodes[victim].stop()
                nodes[victim] = try DeliverydProcess(extraArguments: arguments, port: ports[victim])
                try nodes[victim].waitUntilHealthy()
                try RandomKillTests.expectAcknowledged(promised, readFrom: ports[victim], merchant: merchant)
            }
            #expect(riders.wait(timeout: .now() + 120) == .success, "the riders did not finish")
            #expect(changesAtKills == changesAtKills.sorted() && (changesAtKills.last ?? 0) < totalChanges)
            #expect(acknowledged.snapshot.count == orderCount)
            #expect(acknowledged.snapshot.values.allSatisfy { $0 == RandomKillTests.path.count - 1 })
            for port in ports {
                try RandomKillTests.expectAcknowledged(acknowledged.snapshot, readFrom: port, merchant: merchant)
            }

            let (pushes, repeats) = try RandomKillTests.verifyFinalPushes(
                of: orders, simulator: simulator, killedAt: killedAt, port: ports[0], merchant: merchant)
            print(
                "three nodes: \(kills) kills of nodes \(victims), \(orderCount) orders, \(pushes) pushes accepted, "
                    + "\(repeats) repeated")
        }
    }
}

/// What the nodes of a test share: a database of their own on a PostgreSQL server, the APNs
/// simulator, one sealing key (a reply kept by one node is replayed by another), and the flags that
/// point each node at them. `stop()` stops the simulator and removes the key (the server stops with
/// its last reference).
struct SharedByNodes {
    let server: PostgresServer
    let simulator: APNsSimulator
    let arguments: [String]
    private let sealingKey = NSTemporaryDirectory() + "sealing-" + UUID().uuidString

    init(adminKey: String, extra: [String]) throws {
        server = try PostgresServer()
        let url = try server.newDatabaseURL()
        simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        arguments =
            ["--database-url", url, "--admin-key", adminKey, "--sealing-key-file", sealingKey] + extra
            + DeliverydProcess.crowdArguments + simulator.deliverydArguments
    }

    func stop() {
        simulator.stop()
        try? FileManager.default.removeItem(atPath: sealingKey)
    }
}
