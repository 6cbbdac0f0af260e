import Foundation
import OrderDomain
import PostgresStorage
import Storage
import Synchronization
import TestScheduling
import TestSupport
import Testing

@Suite("PostgreSQL store: what several nodes share", .heavy)
struct PostgresStoreTests {
    /// A periodic task runs on one node at a time: while one store runs it, another store on the same
    /// database skips it; once it is done (or failed) another takes it; another task is not held up.
    @Test func aTaskRunsOnOneNodeAtATime() throws {
        let place = NSTemporaryDirectory() + "exclusive-" + UUID().uuidString
        let (first, second) = (try TestStore.postgres(place), try TestStore.postgres(place))
        let inside = try first.exclusively("retention") {
            try second.exclusively("retention") { "ran twice" } ?? "skipped"
        }
        #expect(inside == "skipped")
        #expect(try second.exclusively("retention") { "ran" } == "ran", "released once done")
        #expect(try first.exclusively("retention") { try second.exclusively("stalled starts") { 1 } } == 1)
        struct Failure: Error {}
        #expect(throws: Failure.self) { try first.exclusively("retention") { throw Failure() } }
        #expect(try second.exclusively("retention") { "ran" } == "ran", "released after a failure")
    }

    /// Nodes write events beside each other, so an event can commit after one numbered later. An
    /// endpoint's stream reads neither while the older transaction runs, then both, in order: the
    /// earlier event is never passed over by a cursor already beyond it.
    @Test func aStreamWaitsForTheTransactionsBeforeItsEvents() throws {
        let place = NSTemporaryDirectory() + "stream-order-" + UUID().uuidString
        let store = try TestStore.postgres(place)
        try store.createWebhookEndpoint(
            WebhookEndpointRecord(
                id: "ep-1", merchantID: "m-1", url: "https://hooks.example.com/ep-1", description: "", eventTypes: [],
                enabled: true, secretSealed: [1], now: Date()))
        func insert(_ id: String, on connection: PostgresConnection) throws {
            try connection.query(
                """
                INSERT INTO webhook_events (id, merchant_id, type, created_at, body)
                VALUES ($1, 'm-1', 'order.status_changed', 0, decode('7b7d', 'hex'))
                """, [.text(id)])
        }
        let url = try TestStore.postgresURL(place)
        let (slow, fast) = (try PostgresConnection.connect(url: url), try PostgresConnection.connect(url: url))
        try slow.execute("BEGIN")
        try insert("msg_slow", on: slow)
        try insert("msg_fast", on: fast)  // committed at once, after the slow one took its number
        func claim() throws -> WebhookClaim {
            try store.claimWebhookDeliveries(
                owner: "n-1", now: Date(), lease: 30, limit: 10, perEndpoint: 10, inFlight: [:], streams: [:])
        }
        #expect(try claim().deliveries.isEmpty, "read while a transaction before it still runs")
        try slow.execute("COMMIT")
        var read: [String] = []
        let deadline = Date().addingTimeInterval(30)
        while read.isEmpty, Date() < deadline {
            read = try claim().deliveries.map(\.eventID)
            if read.isEmpty { usleep(20_000) }
        }
        #expect(read == ["msg_slow", "msg_fast"])
    }
}

@Suite("PostgreSQL store: a restarted server", .serialized, .heavy)
struct PostgresRestartTests {
    /// The pool's idle connections from before a restart are gone; the first read and the first
    /// write after it still succeed, on new connections, instead of failing once per old one.
    @Test func theFirstCallsAfterARestartSucceed() throws {
        let server = try PostgresServer()
        let store = try PostgresStore.open(url: try server.newDatabaseURL(), poolSize: 2)
        _ = try store.apiKeys()
        try server.stop()
        #expect(throws: StorageError.self) { try store.apiKeys() }
        Thread.sleep(forTimeInterval: 0.2)  // past the pool's first wait after a failed connect (0.1 s)
        try server.start()
        _ = try store.apiKeys()
        try server.stop()
        try server.start()
        try store.createAPIKey(
            APIKeyRecord(id: "k-1", keyHash: "h", role: .admin, merchantID: nil, riderID: nil, createdAt: Date()))
        #expect(try store.apiKeys().map(\.id) == ["k-1"])
    }
}

@Suite("PostgreSQL store: wake-ups across nodes", .serialized, .heavy)
struct PostgresOutboxListenerTests {
    /// Counts the listener's calls and lets a test wait for the next one.
    final class Calls: Sendable {
        private let count = Mutex(0)
        private let next = DispatchSemaphore(value: 0)

        func record() {
            count.withLock { $0 += 1 }
            next.signal()
        }

        /// Waits for a call after those counted so far (a bound for a broken listener, not a speed test).
        func waitForOne() -> Bool { next.wait(timeout: .now() + 30) == .success }
        func drain() { while next.wait(timeout: .now()) == .success {} }
    }

    /// An order created through one store wakes the listener of another node at its commit; after the
    /// server restarts the listener connects again by itself and is woken as before.
    @Test func aPushQueuedAnywhereWakesTheListener() throws {
        let server = try PostgresServer()
        let url = try server.newDatabaseURL()
        let store = try PostgresStore.open(url: url)
        let calls = Calls()
        let listener = PostgresOutboxListener(url: url) { calls.record() }
        defer { listener.stop() }
        #expect(calls.waitForOne(), "the listener calls once connected")
        calls.drain()

        func queuePush(_ id: String) throws {
            let (order, event) = try OrderDraft(
                number: id, merchantName: "Pizza Roma", items: [.init(name: "Tea", quantity: 1, price: 2)],
                customer: .init(id: "c-1", name: "Ana", phone: "+49 30 1", locale: "en"), address: "Somewhere 1",
                payment: .init(method: "cash", brand: nil, last4: nil),
                estimatedArrival: Date().addingTimeInterval(1800), note: nil
            ).validated(id: id, merchantID: "m-1", by: .admin, at: Date())
            _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: Date())
            _ = try store.registerActivity(
                orderID: id, activityID: "a", pushToken: "t", environment: .production, bundleID: "b", shown: nil,
                now: Date())
        }
        try queuePush("o-1")
        #expect(calls.waitForOne(), "a push queued by another store woke the listener")

        try server.stop()
        try server.start()
        calls.drain()
        let reconnected = Date().addingTimeInterval(30)
        while listener.connectionsMade < 2, Date() < reconnected { usleep(50_000) }
        #expect(listener.connectionsMade == 2, "the listener did not connect again")
        calls.drain()
        // The store's connections from before the restart fail once each (503 to a client), then are replaced.
        var queued = false
        for _ in 0..<5 where !queued { queued = (try? queuePush("o-2")) != nil }
        #expect(queued)
        #expect(calls.waitForOne(), "a push queued after the restart woke the listener")
    }
}

@Suite("PostgreSQL store: writes batched into transactions", .heavy)
struct PostgresWriteBatchTests {
    struct Refused: Error, Equatable {
        let number: Int
    }

    /// Writes submitted while the one writer (a pool of two) is held up are committed several to a
    /// transaction. Every fifth refuses having only read: its batch goes on. A few refuse after
    /// writing: their batch runs again write by write. Each caller is answered once with its own
    /// outcome; a refused write leaves nothing, the others are kept, each once.
    @Test func eachWriteOfABatchGetsItsOwnOutcome() throws {
        let place = NSTemporaryDirectory() + "batches-" + UUID().uuidString
        let store = try TestStore.postgres(place, poolSize: 2)
        try store.writeSession { session in try session.cached("CREATE TABLE marks (n bigint PRIMARY KEY)").run() }
        struct Answer: Sendable {
            let number: Int
            let transaction: Int64?
            let refused: Bool
        }
        let answers = Mutex<[Answer]>([])
        let done = DispatchGroup()
        let release = DispatchSemaphore(value: 0)
        func submit(_ number: Int, holding: Bool = false) {
            done.enter()
            store.writeSession(
                lockingOrder: nil,
                { session -> Int64 in
                    if holding { release.wait() }
                    let transaction = try session.cached("SELECT txid_current() AS t").firstRow { try $0.int("t") }
                    if number % 5 == 0 { throw Refused(number: number) }
                    try session.send("INSERT INTO marks (n) VALUES (?)", [.integer(Int64(number))])
                    if number % 50 == 7 { throw Refused(number: number) }
                    return transaction ?? -1
                },
                completion: { result in
                    let answer =
                        switch result {
                        case .success(let transaction): Answer(number: number, transaction: transaction, refused: false)
                        case .failure(let error): Answer(number: number, transaction: nil, refused: error is Refused)
                        }
                    answers.withLock { $0.append(answer) }
                    done.leave()
                })
        }
        submit(1, holding: true)
        for number in 2...200 { submit(number) }
        // The holder runs twice if its batch falls back to running writes alone.
        for _ in 0..<2 { release.signal() }
        #expect(done.wait(timeout: .now() + 120) == .success, "every write answered")

        let all = answers.withLock { $0 }
        #expect(all.count == 200 && Set(all.map(\.number)).count == 200, "each write answered once")
        #expect(all.allSatisfy { ($0.number % 5 == 0 || $0.number % 50 == 7) == $0.refused })
        let sharing = Dictionary(grouping: all.compactMap(\.transaction), by: { $0 }).values.filter { $0.count > 1 }
        #expect(!sharing.isEmpty, "writes held up together share a transaction")
        let kept = try store.readSession { session in
            try session.cached("SELECT n FROM marks ORDER BY n").rows { Int(try $0.int("n")) }
        }
        #expect(kept == (1...200).filter { $0 % 5 != 0 && $0 % 50 != 7 })
    }

    /// A write that waited for a writer longer than a caller waits for a connection (5 s) fails
    /// `busy` instead of running late; the write that held the writer up still commits.
    @Test func aWriteThatWaitedTooLongIsBusy() throws {
        let place = NSTemporaryDirectory() + "batch-wait-" + UUID().uuidString
        let store = try TestStore.postgres(place, poolSize: 4)  // one writer
        let started = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        let answered = DispatchSemaphore(value: 0)
        let outcomes = Mutex<[String: String]>([:])
        store.writeSession(
            lockingOrder: nil,
            { session -> Int in
                started.signal()
                _ = held.wait(timeout: .now() + 6)
                return try session.cached("SELECT 1 AS one").firstRow { Int(try $0.int("one")) } ?? 0
            },
            completion: { result in
                outcomes.withLock { $0["holder"] = (try? result.get()).map { "\($0)" } ?? "failed" }
                answered.signal()
            })
        #expect(started.wait(timeout: .now() + 30) == .success)
        store.writeSession(
            lockingOrder: nil,
            { _ in 1 },
            completion: { result in
                let code: String
                do {
                    _ = try result.get()
                    code = "ran"
                } catch let error as StorageError {
                    code = error.code.rawValue
                } catch {
                    code = "\(error)"
                }
                outcomes.withLock { $0["late"] = code }
                answered.signal()
            })
        for _ in 0..<2 { #expect(answered.wait(timeout: .now() + 60) == .success) }
        #expect(outcomes.withLock { $0 } == ["holder": "1", "late": "busy"])
    }
}
