import Foundation
import Synchronization
import TestSupport
import Testing

/// `kill -9` of deliveryd at random moments while riders post status changes, then a restart on the
/// same data, over and over. `DELIVERYD_SOAK_KILLS` sets the number of kills (`make soak`: 200).
///
/// The kills are paced by the load, not by the clock: the load is cut into `kills + 1` equal parts of
/// acknowledged changes; kill k comes at a random point of part k, and the riders wait at the end of
/// part k until kill k is done. So the load spans every kill on any machine, fast or slow, loaded or
/// not, and each kill lands while changes are being made.
@Suite("Random kill -9 under load", .serialized)
struct RandomKillTests {
    static let adminKey = "kill-admin-key-0123456789"
    static let path = ["preparing", "pickup", "delivering", "delivered"]

    @Test func acknowledgedChangesAndFinalPushesSurviveRandomKills() throws {
        let kills = Int(ProcessInfo.processInfo.environment["DELIVERYD_SOAK_KILLS"] ?? "") ?? 20
        let orderCount = kills > 20 ? 1200 : 600
        let totalChanges = orderCount * Self.path.count
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let arguments =
            ["--admin-key", Self.adminKey, "--access-log", "off", "--push-lease", "1"] + simulator.deliverydArguments
        var server = try DeliverydProcess(extraArguments: arguments, keepData: true)
        let dataDirectory = server.dataDirectory
        let port = server.port
        defer {
            _ = server.stop()
            try? FileManager.default.removeItem(atPath: dataDirectory)
        }
        try LoopbackHTTP.waitUntilHealthy(port: port)
        let merchant =
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let riderKey =
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/admin/keys", bearer: Self.adminKey, json: ["role": "rider", "riderId": "r-1"]
            ).json["key"] as? String ?? ""
        let orders = try OrderFixtures.withActivities(
            port: port, count: orderCount, bearer: merchant, numbered: "R", firstToken: 0x5000,
            eta: Date().addingTimeInterval(3600))
        for order in orders {
            let assigned = try LoopbackHTTP.send(
                port: port, "PUT", "/v1/orders/\(order.id)/rider", bearer: merchant,
                json: ["riderId": "r-1", "name": "Sam"])
            try #require(assigned.status == 200)
        }

        // Four threads, each moving its orders one step per pass (the merchant starts preparing, the
        // rider does the rest), retrying through crashes.
        let part = Double(totalChanges) / Double(kills + 1)
        let acknowledged = Acknowledgements(limit: Int(part))
        let riders = DispatchGroup()
        for worker in 0..<4 {
            let mine = orders.enumerated().filter { $0.offset % 4 == worker }.map(\.element.id)
            riders.enter()
            Thread {
                defer { riders.leave() }
                Self.ride(mine, port: port, keys: [merchant, riderKey, riderKey, riderKey], acknowledged: acknowledged)
            }.start()
        }

        var killedAt: [Double] = []
        var changesAtKills: [Int] = []
        for kill in 0..<kills {
            acknowledged.limit = Int(part * Double(kill + 1))
            let due = Int(part * (Double(kill) + Double.random(in: 0.1...0.9)))
            // Waits for the load to get there (or for the riders to stop early, which fails below).
            while acknowledged.changes < due, riders.wait(timeout: .now()) == .timedOut { usleep(2_000) }
            changesAtKills.append(acknowledged.changes)
            server.crash()
            killedAt.append(Date().timeIntervalSince1970)
            server = try DeliverydProcess(
                extraArguments: arguments, dataDirectory: dataDirectory, keepData: true, port: port)
            try LoopbackHTTP.waitUntilHealthy(port: port)
            // Every change acknowledged before the kill is still there.
            let promised = acknowledged.snapshot
            for (id, step) in promised {
                let read = try LoopbackHTTP.send(port: port, "GET", "/v1/orders/\(id)", bearer: merchant)
                let status = (read.json["order"] as? [String: Any])?["status"] as? String ?? ""
                let stored = Self.path.firstIndex(of: status) ?? -1
                #expect(stored >= step, "order \(id) acknowledged \(Self.path[step]) but reads \(status)")
            }
        }
        acknowledged.limit = .max
        #expect(riders.wait(timeout: .now() + 120) == .success, "the riders did not finish")
        #expect(acknowledged.snapshot.count == orderCount)
        // Every kill came while changes were still being made: the last with work left after it.
        #expect(changesAtKills == changesAtKills.sorted() && (changesAtKills.last ?? 0) < totalChanges)
        #expect(acknowledged.snapshot.values.allSatisfy { $0 == Self.path.count - 1 })

        // Every activity ends with its final state pushed, and no state was pushed twice, except a
        // push already answered by APNs when a kill came, before its outcome was written: each copy
        // after the first follows a kill within 2 s of the copy before it.
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
            // When each state last arrived: every further copy must follow a kill that came while
            // the copy before it was in flight.
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
                    let inFlightAtAKill = killedAt.contains { $0 >= previous && $0 - previous < 2 }
                    #expect(inFlightAtAKill, "order \(order.id) got \(state) again with no kill since the last copy")
                }
                seen[state] = receivedAt
            }
        }
        let pushes = accepted.values.reduce(0) { $0 + $1.count }
        print("random kills: \(kills) kills, \(orderCount) orders, \(pushes) pushes accepted, \(repeats) repeated")
    }

    /// Moves each order one step per pass until all are delivered; a request cut by a crash is
    /// retried, and a repeat of an applied change is answered `unchanged` (idempotent).
    private static func ride(_ orders: [String], port: UInt16, keys: [String], acknowledged: Acknowledgements) {
        for step in path.indices {
            for id in orders {
                acknowledged.waitForRoom()
                for _ in 0..<3000 {
                    let answer = try? LoopbackHTTP.send(
                        port: port, "POST", "/v1/orders/\(id)/status", bearer: keys[step], json: ["status": path[step]])
                    if let answer, answer.status == 200 {
                        acknowledged.record(id, step: step)
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

/// The furthest step acknowledged (answered 200) per order, shared by the rider threads, and the gate
/// that holds them at the end of each part of the load until its kill is done.
private final class Acknowledgements: Sendable {
    private let steps = Mutex<(byOrder: [String: Int], changes: Int)>(([:], 0))
    private let gate: Atomic<Int>

    init(limit: Int) { gate = Atomic(limit) }

    /// Riders start no change while `changes` is at this limit.
    var limit: Int {
        get { gate.load(ordering: .relaxed) }
        set { gate.store(newValue, ordering: .relaxed) }
    }

    /// Waits until the gate lets one more change through.
    func waitForRoom() {
        while changes >= limit { usleep(1_000) }
    }

    func record(_ id: String, step: Int) {
        steps.withLock {
            $0.byOrder[id] = step
            $0.changes += 1
        }
    }

    var snapshot: [String: Int] { steps.withLock { $0.byOrder } }
    /// Changes acknowledged so far: one per order and step.
    var changes: Int { steps.withLock { $0.changes } }
}
