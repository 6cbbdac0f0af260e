import Foundation
import Synchronization
import TestScheduling
import TestSupport
import Testing

/// Orders created with an `Idempotency-Key` while deliveryd is killed with `kill -9` over and over:
/// whatever moment a kill hits (before the commit, after it, before the answer left), the retry with
/// the same key answers `201` with a tracking token that opens the order, and the same token every
/// time once one was seen. (The order and its record used to commit apart: a kill between them made
/// the retry answer `200` without a token, and no token could be had again.)
@Suite("kill -9 during idempotent creates", .serialized, .heavy)
struct IdempotentCreateKillTests {
    static let adminKey = "idem-kill-admin-key-0123456789"

    @Test func retriedCreatesAlwaysGetTheirToken() throws {
        let kills = 12
        let creates = 240
        let arguments = ["--admin-key", Self.adminKey, "--access-log", "off"] + DeliverydProcess.crowdArguments
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
        let pacer = LoadPacer(total: creates, kills: kills)
        let answers = Answers()
        let clients = DispatchGroup()
        for client in 0..<2 {
            clients.enter()
            Thread {
                defer { clients.leave() }
                for index in stride(from: client, to: creates, by: 2) {
                    pacer.waitForRoom()
                    for _ in 0..<3000 {
                        if let answer = try? create(index), answer.status < 500 {
                            answers.record(index, answer)
                            pacer.complete()
                            break
                        }
                        usleep(10_000)
                    }
                }
            }.start()
        }
        // The kills are paced by the answered creates (`LoadPacer`).
        _ = try pacer.killDuring(clients) { _ in
            server.crash()
            server = try DeliverydProcess(
                extraArguments: arguments, dataDirectory: dataDirectory, keepData: true, port: port)
            try LoopbackHTTP.waitUntilHealthy(port: port)
        }
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

/// The first answer to each create.
private final class Answers: Sendable {
    struct Answer: Sendable {
        let status: Int
        let token: String?
        let orderID: String?
    }

    private let answers = Mutex<[Int: Answer]>([:])

    func record(_ index: Int, _ response: LoopbackHTTP.Response) {
        let answer = Answer(
            status: response.status, token: response.json["trackingToken"] as? String,
            orderID: (response.json["order"] as? [String: Any])?["id"] as? String)
        answers.withLock { answers in
            if answers[index] == nil { answers[index] = answer }
        }
    }

    var snapshot: [Int: Answer] { answers.withLock { $0 } }
}
