import Foundation
import TestScheduling
import TestSupport
import Testing

/// deliveryd on PostgreSQL (`--database-url`), as an operator runs it: the binary, a real server,
/// the APNs simulator.
@Suite("deliveryd on PostgreSQL", .serialized, .heavy)
struct PostgresNodeTests {
    static let adminKey = "postgres-admin-key-0123456789"

    /// Orders created and changed on one node are in PostgreSQL, not in the node: after a kill -9,
    /// a node started on another data directory serves them, and every acknowledged change reaches
    /// its activity through APNs.
    @Test func acknowledgedChangesSurviveAKillAndServeFromAnotherNode() throws {
        let server = try PostgresServer()
        let url = try server.newDatabaseURL()
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let sealingKey = NSTemporaryDirectory() + "sealing-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: sealingKey) }
        let arguments =
            [
                "--database-url", url, "--admin-key", Self.adminKey, "--sealing-key-file", sealingKey,
                // Pushes the killed node had claimed come back to the next after this lease.
                "--push-lease", "2",
            ] + simulator.deliverydArguments

        let first = try DeliverydProcess(extraArguments: arguments)
        try LoopbackHTTP.waitUntilHealthy(port: first.port)
        let merchant =
            try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let orders = try OrderFixtures.withActivities(
            port: first.port, count: 5, bearer: merchant, numbered: "P", firstToken: 1)
        for order in orders {
            let changed = try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/orders/\(order.id)/status", bearer: merchant,
                json: ["status": "preparing"])
            try #require(changed.status == 200, "\(changed.json)")
        }
        let metrics = String(
            decoding: try LoopbackHTTP.send(port: first.port, "GET", "/metrics", bearer: Self.adminKey).body,
            as: UTF8.self)
        #expect(metrics.contains("deliveryd_database_reachable 1"), "\(metrics.prefix(500))")
        first.crash()

        // Another node: its own (empty) data directory, the same database.
        let second = try DeliverydProcess(extraArguments: arguments)
        defer { _ = second.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: second.port)
        for order in orders {
            let read = try LoopbackHTTP.send(port: second.port, "GET", "/v1/orders/\(order.id)", bearer: merchant)
            #expect((read.json["order"] as? [String: Any])?["status"] as? String == "preparing", "\(read.json)")
        }
        let delivered = try LoopbackHTTP.send(
            port: second.port, "POST", "/v1/orders/\(orders[0].id)/status", bearer: merchant,
            json: ["status": "pickup"])
        #expect(delivered.status == 200, "\(delivered.json)")

        let deadline = Date().addingTimeInterval(30)
        // Order 0's pending "preparing" may be superseded by its "pickup": the newest state is what counts.
        var waiting = Set(orders.dropFirst().map(\.token))
        var pickedUp = false
        while (!waiting.isEmpty || !pickedUp), Date() < deadline {
            for record in try simulator.records() where record["status"] as? Int == 200 {
                let payload = record["payload"] as? String ?? ""
                if payload.contains("\"status\":\"preparing\"") { waiting.remove(record["token"] as? String ?? "") }
                if payload.contains("\"status\":\"pickup\""), record["token"] as? String == orders[0].token {
                    pickedUp = true
                }
            }
            usleep(100_000)
        }
        #expect(waiting.isEmpty, "\(waiting.count) activities never got the change acknowledged before the kill")
        #expect(pickedUp, "the change made on the second node was not pushed")
    }

    /// `deliveryd migrate-to-postgres` moves a stopped SQLite deployment: a node on PostgreSQL then
    /// serves its orders with the same keys; run again, it refuses the database it filled.
    @Test func aSQLiteDeploymentMovesToPostgres() throws {
        let server = try PostgresServer()
        let url = try server.newDatabaseURL()
        let embedded = try DeliverydProcess(extraArguments: ["--admin-key", Self.adminKey], keepData: true)
        defer { try? FileManager.default.removeItem(atPath: embedded.dataDirectory) }
        try LoopbackHTTP.waitUntilHealthy(port: embedded.port)
        let merchant =
            try LoopbackHTTP.send(
                port: embedded.port, "POST", "/v1/admin/keys", bearer: Self.adminKey,
                json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        let created = try LoopbackHTTP.send(
            port: embedded.port, "POST", "/v1/orders", bearer: merchant,
            json: EndToEndTests.orderBody("M-1", customer: "c-1", eta: Date().addingTimeInterval(1800)))
        let orderID = try #require((created.json["order"] as? [String: Any])?["id"] as? String)
        #expect(embedded.stop() == 0)

        let command = ["migrate-to-postgres", "--data-dir", embedded.dataDirectory, "--database-url", url]
        let (status, output, errors) = try DeliverydProcess.run(command)
        #expect(status == 0, "\(errors)")
        #expect(output.contains("orders\t1"), "\(output)")
        let node = try DeliverydProcess(extraArguments: ["--database-url", url, "--admin-key", Self.adminKey])
        defer { _ = node.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: node.port)
        let read = try LoopbackHTTP.send(port: node.port, "GET", "/v1/orders/\(orderID)", bearer: merchant)
        #expect(read.status == 200 && (read.json["order"] as? [String: Any])?["number"] as? String == "M-1")
        let (again, _, refusal) = try DeliverydProcess.run(command)
        #expect(again == 1 && refusal.contains("not empty"), "\(refusal)")
    }

    /// A node whose database cannot be reached says so and stops, instead of serving errors.
    @Test func anUnreachableDatabaseStopsTheStart() throws {
        let (status, _, errors) = try DeliverydProcess.run(
            ["--database-url", "postgresql://deliveryd@127.0.0.1:1/deliveryd", "--listen", "127.0.0.1:0"])
        #expect(status == 1)
        #expect(errors.contains("cannot open the PostgreSQL database"), "\(errors)")
    }

    /// `deliveryd backup` copies SQLite; on PostgreSQL it says which tools do that instead.
    @Test func backupNamesPostgresToolsInstead() throws {
        let (status, _, errors) = try DeliverydProcess.run(
            ["backup", "/tmp/never-written", "--database-url", "postgresql://deliveryd@127.0.0.1:1/deliveryd"])
        #expect(status == 2)
        #expect(errors.contains("pg_dump"), "\(errors)")
    }

    /// The database restarts under a steady stream of ETA changes: while it is down every request is
    /// answered `503` with `Retry-After` (never a 500, never a hang) and `/readyz` says not ready; once
    /// it is back the same deliveryd carries on, and every change it acknowledged is stored.
    @Test func aDatabaseRestartUnderLoadLosesNothingAcknowledged() throws {
        let server = try PostgresServer()
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let node = try DeliverydProcess(
            extraArguments: [
                "--database-url", try server.newDatabaseURL(), "--admin-key", Self.adminKey,
            ] + DeliverydProcess.crowdArguments + simulator.deliverydArguments)
        defer { _ = node.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: node.port)
        let ready = try LoopbackHTTP.send(port: node.port, "GET", "/readyz")
        #expect(ready.status == 200 && (ready.json["database"] as? [String: Any])?["engine"] as? String == "postgresql")
        let stream = try ETAStream(port: node.port, adminKey: Self.adminKey)

        try stream.load(until: Date().addingTimeInterval(1))
        let beforeRestart = stream.acknowledged
        try server.stop()
        try stream.load(until: Date().addingTimeInterval(1.5))
        let notReady = try LoopbackHTTP.send(port: node.port, "GET", "/readyz")
        try server.start()
        let carriedOn = try stream.carryOn()

        #expect(!beforeRestart.isEmpty, "no change was acknowledged before the restart")
        #expect(!stream.refusals.isEmpty, "no request reached deliveryd while the database was down")
        #expect(stream.refusalsWereRetryable, "\(stream.refusals)")
        #expect(notReady.status == 503, "readyz while the database was down: \(notReady.status)")
        #expect(carriedOn != nil, "deliveryd did not carry on after the database came back")
        try stream.expectNothingAcknowledgedLost()
    }

    /// The primary is lost (stopped at once, as a crash) under a stream of ETA changes and its
    /// synchronous standby promoted: the requests in the gap get 503 with Retry-After, the same
    /// deliveryd finds the new primary through the URL's two hosts (`target_session_attrs`) and
    /// carries on, and every change it acknowledged is on the new primary. Prints the time from the
    /// promotion to the first change acknowledged again.
    @Test func aPrimaryLostToItsStandbyLosesNothingAcknowledged() throws {
        let primary = try PostgresServer()
        let standby = try PostgresServer(standbyOf: primary)
        let url =
            "postgresql://deliveryd:deliveryd@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/deliveryd"
            + "?target_session_attrs=read-write"
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let node = try DeliverydProcess(
            extraArguments: ["--database-url", url, "--admin-key", Self.adminKey]
                + DeliverydProcess.crowdArguments + simulator.deliverydArguments)
        defer { _ = node.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: node.port)
        let stream = try ETAStream(port: node.port, adminKey: Self.adminKey)

        try stream.load(until: Date().addingTimeInterval(1))
        let beforeFailover = stream.acknowledged
        try primary.stop()
        try stream.load(until: Date().addingTimeInterval(1))
        try standby.promote()
        let promoted = Date()
        let carriedOn = try stream.carryOn()
        if let carriedOn {
            print("failover: first change acknowledged \(carriedOn.timeIntervalSince(promoted)) s after the promotion")
        }

        #expect(!beforeFailover.isEmpty, "no change was acknowledged before the failover")
        #expect(!stream.refusals.isEmpty && stream.refusalsWereRetryable, "\(stream.refusals)")
        #expect(carriedOn != nil, "deliveryd did not carry on on the promoted standby")
        try stream.expectNothingAcknowledgedLost()
    }
}

/// A steady stream of ETA changes to three orders, one request at a time, recording which step each
/// order last had acknowledged: each change moves the ETA one second further, so the stored ETA says
/// which change the database holds.
final class ETAStream {
    let port: UInt16
    let merchant: String
    let orders: [(id: String, token: String)]
    let base = (Date().timeIntervalSince1970 + 3600).rounded(.down)
    private(set) var step = 0
    private(set) var acknowledged: [String: Int] = [:]
    /// Every answer but 200: status, error code and Retry-After.
    private(set) var refusals: [String] = []

    init(port: UInt16, adminKey: String) throws {
        self.port = port
        merchant =
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/admin/keys", bearer: adminKey, json: ["role": "merchant", "merchantId": "m-1"]
            ).json["key"] as? String ?? ""
        orders = try OrderFixtures.withActivities(
            port: port, count: 3, bearer: merchant, numbered: "R", firstToken: 100)
    }

    /// Sends the next ETA to each order in turn until `deadline`.
    func load(until deadline: Date) throws {
        let formatter = ISO8601DateFormatter()
        while Date() < deadline {
            step += 1
            let order = orders[step % orders.count]
            let reply = try LoopbackHTTP.send(
                port: port, "PATCH", "/v1/orders/\(order.id)/eta", bearer: merchant,
                json: ["estimatedArrival": formatter.string(from: Date(timeIntervalSince1970: base + Double(step)))])
            if reply.status == 200 {
                acknowledged[order.id] = step
            } else {
                let reason = (reply.json["error"] as? [String: Any])?["code"] as? String ?? "?"
                refusals.append("\(reply.status) \(reason) retry-after=\(reply.headers["retry-after"] ?? "none")")
                usleep(20_000)
            }
        }
    }

    /// Loads until 20 changes were acknowledged again (at most 30 s); returns when the first was.
    func carryOn() throws -> Date? {
        let deadline = Date().addingTimeInterval(30)
        var first: Date?
        var acknowledgedAgain = 0
        while acknowledgedAgain < 20, Date() < deadline {
            let before = acknowledged
            try load(until: Date().addingTimeInterval(0.2))
            let new = acknowledged.filter { before[$0.key] != $0.value }.count
            if new > 0, first == nil { first = Date() }
            acknowledgedAgain += new
        }
        return acknowledgedAgain >= 20 ? first : nil
    }

    /// Never a 500 nor a hang: every refusal was 503 with Retry-After.
    var refusalsWereRetryable: Bool {
        refusals.allSatisfy { $0.hasPrefix("503 ") && !$0.hasSuffix("retry-after=none") }
    }

    /// Each order's stored ETA is its last acknowledged change or a later one (a change cut off by the
    /// fault may be stored unacknowledged, never the reverse).
    func expectNothingAcknowledgedLost() throws {
        for order in orders {
            let read = try LoopbackHTTP.send(port: port, "GET", "/v1/orders/\(order.id)", bearer: merchant)
            let text = (read.json["order"] as? [String: Any])?["estimatedArrival"] as? String ?? ""
            let stored = ISO8601DateFormatter().date(
                from: text.replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression))
            let storedStep = stored.map { Int(($0.timeIntervalSince1970 - base).rounded()) }
            #expect((storedStep ?? -1) >= (acknowledged[order.id] ?? 0), "\(order.id): stored \(text)")
        }
    }
}
