import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import Testing

@testable import DeliveryAPI

/// Riders' open orders kept between posts: for a second, per rider, and never past a change.
@Suite("Rider orders cache")
struct RiderOrdersCacheTests {
    let start = Date(timeIntervalSince1970: 1_796_212_800)

    /// Counts the reads of the store.
    final class Reads: @unchecked Sendable {
        // Unchecked: each test touches it from its own thread only.
        var count = 0
    }

    static func order(_ id: String) -> Order {
        Order(
            id: id, merchantID: "m-1", number: id, merchantName: "Pizza Roma", items: [],
            customer: Customer(id: "c-1", name: "Ana", phone: "+49 30 1234567", locale: "en"), address: "Main St 1",
            payment: Payment(method: "cash", brand: nil, last4: nil), note: nil, status: .delivering,
            cancelledAt: nil, estimatedArrival: Date(timeIntervalSince1970: 900),
            rider: Rider(id: "r-1", name: "Marco", phone: nil),
            createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0), destination: nil)
    }

    @Test func keptForItsLifetimePerRider() throws {
        let cache = RiderOrdersCache(lifetime: 1)
        let reads = Reads()
        func orders(_ rider: String, at seconds: Double) throws -> [String] {
            try cache.orders(merchantID: "m-1", riderID: rider, now: start.addingTimeInterval(seconds)) {
                reads.count += 1
                return [Self.order("o-\(rider)-\(reads.count)")]
            }.map(\.id)
        }
        #expect(try orders("r-1", at: 0) == ["o-r-1-1"])
        #expect(try orders("r-1", at: 0.9) == ["o-r-1-1"])
        #expect(try orders("r-2", at: 0.9) == ["o-r-2-2"], "another rider is read on its own")
        #expect(try orders("r-1", at: 1.0) == ["o-r-1-3"], "read again once a second passed")
        #expect(try orders("r-1", at: 0.5) == ["o-r-1-4"], "a clock that went back reads again")
        #expect(reads.count == 4)
    }

    @Test func aForgetDropsTheRiderAndOvertakesAReadUnderWay() throws {
        let cache = RiderOrdersCache(lifetime: 60)
        let reads = Reads()
        let read: () throws(StorageError) -> [Order] = {
            reads.count += 1
            return [Self.order("o-\(reads.count)")]
        }
        _ = try cache.orders(merchantID: "m-1", riderID: "r-1", now: start, read: read)
        cache.forget(merchantID: "m-1", riderID: "r-1")
        #expect(try cache.orders(merchantID: "m-1", riderID: "r-1", now: start, read: read).map(\.id) == ["o-2"])
        #expect(try cache.orders(merchantID: "m-1", riderID: "r-1", now: start, read: read).map(\.id) == ["o-2"])
        #expect(reads.count == 2)

        // A change commits while the rider's orders are being read: what that read saw is not kept.
        cache.forget(merchantID: "m-1", riderID: "r-1")
        _ = try cache.orders(merchantID: "m-1", riderID: "r-1", now: start) { () throws(StorageError) in
            cache.forget(merchantID: "m-1", riderID: "r-1")
            return [Self.order("stale")]
        }
        #expect(try cache.orders(merchantID: "m-1", riderID: "r-1", now: start, read: read).map(\.id) == ["o-3"])
        #expect(
            try cache.orders(merchantID: "m-2", riderID: "r-1", now: start, read: read).map(\.id) == ["o-4"],
            "riders are their merchant's own")
    }

    /// What expired is let go of, not only passed over: the orders (customers' details among them)
    /// do not stay in memory past their second.
    @Test func expiredRidersAreLetGo() throws {
        let cache = RiderOrdersCache(lifetime: 1)
        let read: () throws(StorageError) -> [Order] = { [Self.order("o-1")] }
        _ = try cache.orders(merchantID: "m-1", riderID: "r-1", now: start, read: read)
        _ = try cache.orders(merchantID: "m-1", riderID: "r-2", now: start.addingTimeInterval(0.5), read: read)
        cache.dropExpired(now: start.addingTimeInterval(1.2))
        #expect(cache.keptRiders == 1)
        #expect(cache.cachedOrders(merchantID: "m-1", riderID: "r-2", now: start.addingTimeInterval(1.2)) != nil)
        cache.dropExpired(now: start.addingTimeInterval(2))
        #expect(cache.keptRiders == 0)
    }
}
