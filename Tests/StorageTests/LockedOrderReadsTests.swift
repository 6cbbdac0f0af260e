import DeliveryActivityContract
import Dispatch
import Foundation
import OrderDomain
import PostgresStorage
import Synchronization
import TestScheduling
import TestSupport
import Testing

@testable import Storage

/// A batch's orders read and locked ahead on PostgreSQL, against a real server.
@Suite("PostgreSQL: orders read ahead for a batch", .heavy)
struct LockedOrderReadsTests {
    /// The read ahead locks the orders it finds and hands each to the first `lockOrder` of it without
    /// a wait on the server; a second `lockOrder` reads the order again, with what was written since.
    @Test func aReadAheadAnswersTheFirstLockOnce() throws {
        let place = NSTemporaryDirectory() + "read-ahead-" + UUID().uuidString
        let store = try TestStore.postgres(place)
        let stored = try ["o-1", "o-2", "o-3"].map { try StoreFixtures.seed(store, id: $0) }
        let other = try PostgresConnection.connect(url: try TestStore.postgresURL(place))
        func lockedElsewhere(_ id: String) -> Bool {
            do {
                try other.query("SELECT id FROM orders WHERE id = $1 FOR UPDATE NOWAIT", [.text(id)])
                return false
            } catch {
                return error.code == .busy
            }
        }
        try store.writeSession { session in
            let connection = try #require(session as? PostgresConnection)
            let reads = try #require(session.lockedOrderReads)
            try reads.readLocking(["o-2", "o-1", "missing", "o-1"], on: session)
            #expect(lockedElsewhere("o-1") && lockedElsewhere("o-2"), "the orders read are locked")
            #expect(!lockedElsewhere("o-3"))

            let transaction = SQLTransaction(connection: session)
            let trips = connection.roundTrips
            let first = try #require(try transaction.lockOrder(id: "o-1"))
            #expect(connection.roundTrips == trips, "answered from the read ahead")
            #expect(first == stored[0])
            let outcome = try first.applying(StatusChange(status: .preparing), by: .admin, at: StoreFixtures.t0)
            _ = try transaction.record(outcome, of: first, now: StoreFixtures.t0, requestID: nil)
            let again = try #require(try transaction.lockOrder(id: "o-1"))
            #expect(connection.roundTrips > trips, "read again")
            #expect(again.status == .preparing)
            #expect(try transaction.lockOrder(id: "missing") == nil)
        }
        #expect(!lockedElsewhere("o-2"), "released at the commit")
        // Forgotten with the transaction: o-2's read is not handed to the next one.
        try store.writeSession { session in
            let reads = try #require(session.lockedOrderReads)
            #expect(reads.take("o-2") == nil)
        }
        #expect(try store.order(id: "o-1")?.status == .preparing)
    }

    /// Writes that name their order, submitted while the one writer is held up, go in batches whose
    /// orders are read ahead: three changes of each of ten orders, batched together, each decide on
    /// the order as the one before left it (no change lost), and each caller gets its own outcome.
    @Test func batchedWritesOfOneOrderEachSeeTheOneBefore() throws {
        let place = NSTemporaryDirectory() + "read-ahead-batches-" + UUID().uuidString
        let store = try TestStore.postgres(place, poolSize: 4)  // one writer
        let ids = (1...10).map { "o-\($0)" }
        let orders = try ids.map { try StoreFixtures.seed(store, id: $0) }
        let done = DispatchGroup()
        let release = DispatchSemaphore(value: 0)
        let outcomes = Mutex<[String: [String]]>([:])
        done.enter()
        store.write(
            lockingOrder: nil, { _ in _ = release.wait(timeout: .now() + 30) }, completion: { _ in done.leave() })
        for round in 1...3 {
            for order in orders {
                done.enter()
                let at = StoreFixtures.t0.addingTimeInterval(Double(round))
                store.write(
                    lockingOrder: order.id,
                    { transaction in
                        let current = try #require(try transaction.lockOrder(id: order.id))
                        let later = current.estimatedArrival.addingTimeInterval(60)
                        let outcome = try current.changingEstimatedArrival(to: later, by: .admin, at: at)
                        return try transaction.record(outcome, of: current, now: at, requestID: nil).outcome
                            .transitionName
                    },
                    completion: { result in
                        let answer = (try? result.get()) ?? "failed"
                        outcomes.withLock { $0[order.id, default: []].append(answer) }
                        done.leave()
                    })
            }
        }
        release.signal()
        #expect(done.wait(timeout: .now() + 120) == .success, "every write answered")
        #expect(
            outcomes.withLock { $0 }
                == Dictionary(uniqueKeysWithValues: ids.map { ($0, Array(repeating: "applied", count: 3)) }))
        for order in orders {
            #expect(try store.order(id: order.id)?.estimatedArrival == order.estimatedArrival.addingTimeInterval(180))
            #expect(try store.events(orderID: order.id).count == 4)
        }
    }
}
