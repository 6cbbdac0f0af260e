import Foundation
import Synchronization
import TestSupport
import Testing

/// Orders created with an `Idempotency-Key` while deliveryd is killed with `kill -9` over and over:
/// whatever moment a kill hits (before the commit, after it, before the answer left), the retry with
/// the same key answers `201` with a tracking token that opens the order, and the same token every
/// time once one was seen. (The order and its record used to commit apart: a kill between them made
/// the retry answer `200` without a token, and no token could be had again.)
@Suite("kill -9 during idempotent creates", .serialized)
struct IdempotentCreateKillTests {
    static let adminKey = "idem-kill-admin-key-0123456789"

    @Test func retriedCreatesAlwaysGetTheirToken() throws {
        let kills = 12
        let creates = 240
        let arguments = ["--admin-key", Self.adminKey, "--access-log", "off"]
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
        let eta = Date().addingTimeInterval(3600)
        // A retry sends the very same bytes, as a client library does.
        let bodies = try (0..<creates).map { index in
            try JSONSerialization.data(
                withJSONObject: EndToEndTests.orderBody("K-\(index)", customer: "c-\(index)", eta: eta),
                options: [.sortedKeys])
        }
        @Sendable func create(_ index: Int) throws -> LoopbackHTTP.Response {
            try LoopbackHTTP.send(
                port: port, "POST", "/v1/orders", bearer: merchant,
                headers: ["Idempotency-Key": "create-\(index)", "Content-Type": "application/json"],
                body: bodies[index])
        }

        // Two clients create orders, retrying each through the kills until it is answered.
        let answers = Answers()
        let clients = DispatchGroup()
        for client in 0..<2 {
            clients.enter()
            Thread {
                defer { clients.leave() }
                for index in stride(from: client, to: creates, by: 2) {
                    answers.waitForRoom()
                    for _ in 0..<3000 {
                        if let answer = try? create(index), answer.status < 500 {
                            answers.record(index, answer)
                            break
                        }
                        usleep(10_000)
                    }
                }
            }.start()
        }
        // Kill k comes at a random point of the k-th of `kills + 1` parts of the creates; the
        // clients wait at the end of each part until its kill is done.
        let part = Double(creates) / Double(kills + 1)
        for kill in 0..<kills {
            answers.limit = Int(part * Double(kill + 1))
            let due = Int(part * (Double(kill) + Double.random(in: 0.1...0.9)))
            while answers.count < due, clients.wait(timeout: .now()) == .timedOut { usleep(1_000) }
            server.crash()
            server = try DeliverydProcess(
                extraArguments: arguments, dataDirectory: dataDirectory, keepData: true, port: port)
            try LoopbackHTTP.waitUntilHealthy(port: port)
        }
        answers.limit = .max
        #expect(clients.wait(timeout: .now() + 120) == .success, "the clients did not finish")

        let first = answers.snapshot
        #expect(first.count == creates)
        for index in 0..<creates {
            let answered = first[index]
            #expect(answered?.status == 201, "create \(index) answered \(answered?.status ?? 0)")
            let retried = try create(index)
            #expect(
                retried.status == 201 && retried.headers["idempotent-replayed"] == "true",
                "retry of \(index): \(retried.status) \(retried.text)")
            let token = retried.json["trackingToken"] as? String
            #expect(token != nil && token == answered?.token, "create \(index) got another token on retry")
            let orderID = (retried.json["order"] as? [String: Any])?["id"] as? String ?? ""
            #expect(orderID == answered?.orderID)
            let opened = try LoopbackHTTP.send(port: port, "GET", "/v1/orders/\(orderID)/live-activity", bearer: token)
            #expect(opened.status == 200, "the token of create \(index) does not open its order")
        }
        let orders = try LoopbackHTTP.send(port: port, "GET", "/metrics", bearer: Self.adminKey).text
        #expect(orders.contains(#"deliveryd_orders{status="placed"} \#(creates)"#), "one order per key")
    }
}

/// The first answer to each create, and the gate that holds the clients until a kill is done.
private final class Answers: Sendable {
    struct Answer: Sendable {
        let status: Int
        let token: String?
        let orderID: String?
    }

    private let answers = Mutex<[Int: Answer]>([:])
    private let gate = Atomic<Int>(0)

    var limit: Int {
        get { gate.load(ordering: .relaxed) }
        set { gate.store(newValue, ordering: .relaxed) }
    }

    func waitForRoom() {
        while count >= limit { usleep(1_000) }
    }

    func record(_ index: Int, _ response: LoopbackHTTP.Response) {
        let answer = Answer(
            status: response.status, token: response.json["trackingToken"] as? String,
            orderID: (response.json["order"] as? [String: Any])?["id"] as? String)
        answers.withLock { answers in
            if answers[index] == nil { answers[index] = answer }
        }
    }

    var count: Int { answers.withLock { $0.count } }
    var snapshot: [Int: Answer] { answers.withLock { $0 } }
}
