import Foundation
import Synchronization
import TestSupport
import Testing

extension KillUnderLoad {
    /// `kill -9` of deliveryd at random moments while riders post status changes, then a restart on the
    /// same data, over and over. `DELIVERYD_SOAK_KILLS` sets the number of kills (`make soak`: 200).
    ///
    /// The kills are paced by the acknowledged changes, not by the clock (`LoadPacer`).
    @Suite("Random kill -9 under load", .serialized)
    struct RandomKillTests {
        static let adminKey = "kill-admin-key-0123456789"
        static let path = ["preparing", "pickup", "delivering", "delivered"]

        /// Whether deliveryd's push log of the order holds an attempt of `event` that got no HTTP answer.
        static func hasUnansweredAttempt(_ orderID: String, event: String, port: UInt16, merchant: String) throws
            -> Bool
        {
            let log = try LoopbackHTTP.send(port: port, "GET", "/v1/orders/\(orderID)/pushes", bearer: merchant)
            let attempts = log.json["pushes"] as? [[String: Any]] ?? []
            return attempts.contains { $0["event"] as? String == event && $0["httpStatus"] is NSNull }
        }

        @Test func acknowledgedChangesAndFinalPushesSurviveRandomKills() throws {
            let kills = Int(ProcessInfo.processInfo.environment["DELIVERYD_SOAK_KILLS"] ?? "") ?? 20
            let orderCount = kills > 20 ? 1200 : 600
            let totalChanges = orderCount * Self.path.count
            let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
            defer { simulator.stop() }
            let arguments =
                // The default lease (30 s): a shorter one expires while a loaded machine writes a batch's
                // outcomes, and the pushes it held are rightly sent again, which no kill explains.
                ["--admin-key", Self.adminKey, "--access-log", "off"] + DeliverydProcess.crowdArguments
                + simulator.deliverydArguments
            var server = try DeliverydProcess(extraArguments: arguments, keepData: true)
            let dataDirectory = server.dataDirectory
            let port = server.port
            defer {
                _ = server.stop()
                try? FileManager.default.removeItem(atPath: dataDirectory)
            }
            try LoopbackHTTP.waitUntilHealthy(port: port)
            let load = try RidingLoad(
                ports: [port], adminKey: Self.adminKey, orderCount: orderCount, numbered: "R", firstToken: 0x5000,
                kills: kills)
            let (merchant, orders, pacer, acknowledged, riders) =
                (load.merchant, load.orders, load.pacer, load.acknowledged, load.riders)

            var killedAt: [Double] = []
            let changesAtKills = try pacer.killDuring(riders) { _ in
                server.crash()
                killedAt.append(Date().timeIntervalSince1970)
                server = try DeliverydProcess(
                    extraArguments: arguments, dataDirectory: dataDirectory, keepData: true, port: port)
                try LoopbackHTTP.waitUntilHealthy(port: port)
                // Every change acknowledged before the kill is still there.
                try Self.expectAcknowledged(acknowledged.snapshot, readFrom: port, merchant: merchant)
            }
            #expect(riders.wait(timeout: .now() + 120) == .success, "the riders did not finish")
            #expect(acknowledged.snapshot.count == orderCount)
            // Every kill came while changes were still being made: the last with work left after it.
            #expect(changesAtKills == changesAtKills.sorted() && (changesAtKills.last ?? 0) < totalChanges)
            #expect(acknowledged.snapshot.values.allSatisfy { $0 == Self.path.count - 1 })

            let (pushes, repeats) = try Self.verifyFinalPushes(
                of: orders, simulator: simulator, killedAt: killedAt, port: port, merchant: merchant)
            print("random kills: \(kills) kills, \(orderCount) orders, \(pushes) pushes accepted, \(repeats) repeated")
        }

        /// Every change in `promised` (order id → furthest step answered 200) reads back from `port`.
        static func expectAcknowledged(_ promised: [String: Int], readFrom port: UInt16, merchant: String) throws {
            for (id, step) in promised {
                let read = try LoopbackHTTP.send(port: port, "GET", "/v1/orders/\(id)", bearer: merchant)
                let status = (read.json["order"] as? [String: Any])?["status"] as? String ?? ""
                let stored = path.firstIndex(of: status) ?? -1
                #expect(stored >= step, "order \(id) acknowledged \(path[step]) but reads \(status) on port \(port)")
            }
        }

        /// Waits for every activity's pushes to end, then checks them: each ends with its final state
        /// pushed, timestamps never go back, and no state was pushed twice unless a kill came between the
        /// two copies (the first was answered by APNs, its outcome not yet written). Returns the pushes
        /// APNs accepted and how many repeated a state.
        static func verifyFinalPushes(
            of orders: [(id: String, token: String)], simulator: APNsSimulator, killedAt: [Double], port: UInt16,
            merchant: String
        ) throws -> (pushes: Int, repeats: Int) {
            let deadline = Date().addingTimeInterval(90)
            var accepted: [String: [[String: Any]]] = [:]
            repeat {
                accepted = [:]
                for record in try simulator.records() where record["status"] as? Int == 200 {
                    accepted[record["token"] as? String ?? "", default: []].append(record)
                }
                let finished = orders.allSatisfy { order in
                    accepted[order.token]?.last.map { EndToEndTests.aps($0)["event"] as? String == "end" } ?? false
                }
                if finished { break }
                usleep(200_000)
            } while Date() < deadline
            var repeats = 0
            for order in orders {
                let pushes = accepted[order.token] ?? []
                let last = pushes.last.map(EndToEndTests.aps)
                #expect(last?["event"] as? String == "end", "order \(order.id) never got its end push")
                #expect((last?["content-state"] as? [String: Any])?["status"] as? String == "delivered")
                // When each state last arrived: a further copy needs a kill after the one before it.
                var seen: [String: Double] = [:]
                var lastTimestamp = 0
                for push in pushes {
                    let aps = EndToEndTests.aps(push)
                    let state = "\(aps["event"] ?? "")/\((aps["content-state"] as? [String: Any])?["status"] ?? "")"
                    let receivedAt = push["received_at"] as? Double ?? 0
                    let timestamp = aps["timestamp"] as? Int ?? 0
                    #expect(timestamp >= lastTimestamp, "timestamps went back for \(order.id)")
                    lastTimestamp = timestamp
                    if let previous = seen[state] {
                        repeats += 1
                        // The simulator stamps a copy when it has read it, which may be after the
                        // kill of the node that sent it (in flight at the kill): a kill up to the
                        // pushers' request timeout (10 s) before the first copy explains it too.
                        let killedBetween = killedAt.contains { $0 >= previous - 10 && $0 <= receivedAt }
                        // Without a kill, only an attempt whose answer never reached the worker (it came
                        // after the client's timeout on a loaded machine) may send a state again.
                        let unanswered =
                            try !killedBetween
                            && Self.hasUnansweredAttempt(
                                order.id, event: aps["event"] as? String ?? "", port: port, merchant: merchant)
                        #expect(
                            killedBetween || unanswered,
                            "order \(order.id) got \(state) again with no kill nor unanswered attempt since the last copy"
                        )
                    }
                    seen[state] = receivedAt
                }
            }
            return (accepted.values.reduce(0) { $0 + $1.count }, repeats)
        }

        /// Moves each order one step per pass until all are delivered; a request cut by a crash is
        /// retried (on another of `ports`, as a load balancer would, when there are several), and a
        /// repeat of an applied change is answered `unchanged` (idempotent). Each request goes to a port
        /// picked at random.
        static func ride(
            _ orders: [String], ports: [UInt16], keys: [String], pacer: LoadPacer, acknowledged: Acknowledgements
        ) {
            for step in path.indices {
                for id in orders {
                    pacer.waitForRoom()
                    let first = Int.random(in: ports.indices)
                    for attempt in 0..<3000 {
                        let answer = try? LoopbackHTTP.send(
                            port: ports[(first + attempt) % ports.count], "POST", "/v1/orders/\(id)/status",
                            bearer: keys[step], json: ["status": path[step]])
                        if let answer, answer.status == 200 {
                            acknowledged.record(id, step: step)
                            pacer.complete()
                            break
                        }
                        if let answer, (400..<500).contains(answer.status) {
                            Issue.record("\(path[step]) of \(id) refused: \(answer.status) \(answer.text)")
                            return
                        }
                        usleep(20_000)
                    }
                }
            }
        }
    }
}

/// The furthest step acknowledged (answered 200) per order, shared by the rider threads.
final class Acknowledgements: Sendable {
    private let steps = Mutex<[String: Int]>([:])

    func record(_ id: String, step: Int) { steps.withLock { $0[id] = step } }

    var snapshot: [String: Int] { steps.withLock { $0 } }
}

/// The load of the kill tests: a merchant and a rider key, orders with activities assigned to the
/// rider, and four threads each moving its share of the orders one step per pass (the merchant starts
/// preparing, the rider does the rest), each request to one of `ports`, retrying through crashes.
struct RidingLoad {
    let merchant: String
    let orders: [(id: String, token: String)]
    let pacer: LoadPacer
    let acknowledged = Acknowledgements()
    let riders = DispatchGroup()

    /// Creates the keys and orders through `ports` in turn, then starts the riders.
    init(
        ports: [UInt16], adminKey: String, orderCount: Int, numbered prefix: String, firstToken: Int, kills: Int
    ) throws {
        merchant =
            try LoopbackHTTP.send(
                port: ports[1 % ports.count], "POST", "/v1/admin/keys", bearer: adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let riderKey =
            try LoopbackHTTP.send(
                port: ports[2 % ports.count], "POST", "/v1/admin/keys", bearer: adminKey,
                json: ["role": "rider", "merchantId": "m-1", "riderId": "r-1"]
            ).json["key"] as? String ?? ""
        orders = try OrderFixtures.withActivities(
            port: ports[0], count: orderCount, bearer: merchant, numbered: prefix, firstToken: firstToken,
            eta: Date().addingTimeInterval(3600))
        for (index, order) in orders.enumerated() {
            let assigned = try LoopbackHTTP.send(
                port: ports[index % ports.count], "PUT", "/v1/orders/\(order.id)/rider", bearer: merchant,
                json: ["riderId": "r-1", "name": "Sam"])
            try #require(assigned.status == 200)
        }
        pacer = LoadPacer(total: orderCount * KillUnderLoad.RandomKillTests.path.count, kills: kills)
        let keys = [merchant, riderKey, riderKey, riderKey]
        for worker in 0..<4 {
            let mine = orders.enumerated().filter { $0.offset % 4 == worker }.map(\.element.id)
            riders.enter()
            Thread { [riders, pacer, acknowledged] in
                defer { riders.leave() }
                KillUnderLoad.RandomKillTests.ride(
                    mine, ports: ports, keys: keys, pacer: pacer, acknowledged: acknowledged)
            }.start()
        }
    }
}
