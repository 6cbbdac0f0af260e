import DeliveryActivityContract
import Foundation
import OrderDomain
import TestSupport
import Testing

@testable import Storage

/// What every position of a rider reads: the rider's open orders.
@Suite("A rider's open orders")
struct RiderOrdersTests {
    /// Orders `o-00`… of merchant m-1, created in that order; those before `openFrom` delivered (or
    /// cancelled) by `rider` before the rest, which are open and assigned to the rider given.
    static func history(_ store: any DeliveryStore, closed: Int, open: [(id: String, rider: String)]) throws {
        let t = StoreFixtures.t0
        func create(_ id: String, rider: String) throws {
            let (order, event) = try StoreFixtures.newOrder(id: id, number: "N-\(id)")
            _ = try store.createOrder(order, event: event, trackingTokenHash: nil, now: t)
            _ = try store.change(orderID: id, now: t) { order throws(OrderError) in
                try order.assigning(Rider(id: rider, name: "Rita", phone: nil), by: .admin, at: t)
            }
        }
        for index in 0..<closed {
            let id = String(format: "o-%02d", index)
            try create(id, rider: "r-1")
            let path: [OrderStatus] = index % 5 == 4 ? [.cancelled] : [.preparing, .pickup, .delivering, .delivered]
            for status in path { _ = try StoreFixtures.setStatus(store, id, status) }
        }
        for order in open { try create(order.id, rider: order.rider) }
    }

    @Test(arguments: StoreBackend.all)
    func onlyOpenOrdersOldestFirstWhateverTheHistory(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let store = try backend.open(place.path)
        try Self.history(
            store, closed: 20, open: [("o-50", "r-1"), ("o-51", "r-2"), ("o-52", "r-1"), ("o-53", "r-1")])
        _ = try StoreFixtures.setStatus(store, "o-52", .preparing)
        #expect(
            try store.openOrders(merchantID: "m-1", riderID: "r-1", limit: 20).map(\.id) == ["o-50", "o-52", "o-53"])
        #expect(try store.openOrders(merchantID: "m-1", riderID: "r-1", limit: 2).map(\.id) == ["o-50", "o-52"])
        #expect(try store.openOrders(merchantID: "m-1", riderID: "r-2", limit: 20).map(\.id) == ["o-51"])
        #expect(try store.openOrders(merchantID: "m-2", riderID: "r-1", limit: 20).isEmpty)
        _ = try StoreFixtures.setStatus(store, "o-50", .cancelled)
        #expect(try store.openOrders(merchantID: "m-1", riderID: "r-1", limit: 20).map(\.id) == ["o-52", "o-53"])
    }

    /// A ride is stored only on an order still open and still the rider's: positions kept in memory
    /// while the order went to another rider (or closed) move nothing.
    @Test(arguments: StoreBackend.all)
    func aRideIsStoredOnlyForTheRiderOfTheOrder(backend: StoreBackend) throws {
        let place = StoreContractTests.Place()
        let store = try backend.open(place.path)
        try Self.history(store, closed: 1, open: [("o-50", "r-1"), ("o-51", "r-2")])
        let tracking = DeliveryTracking(
            positionAt: StoreFixtures.t0, remainingDistance: 900, initialDistance: 2_000,
            estimatedArrival: StoreFixtures.t0.addingTimeInterval(300))
        let rides = ["o-00", "o-50", "o-51"].map {
            RideUpdate(orderID: $0, riderID: "r-1", tracking: tracking, queuesPushes: false)
        }
        _ = try store.recordRides(rides, now: StoreFixtures.t0)
        #expect(try store.order(id: "o-50")?.tracking == tracking)
        #expect(try store.order(id: "o-51")?.tracking == nil, "another rider's order")
        #expect(try store.order(id: "o-00")?.tracking == nil, "a closed order")
    }

    /// SQLite reads them through the index of open orders, in its order: no sort, no delivered order.
    @Test func sqliteReadsThemThroughTheIndexOfOpenOrders() throws {
        let place = StoreContractTests.Place()
        let store = try Database.open(StorageConfiguration(dataDirectory: place.path))
        try Self.history(store, closed: 10, open: [("o-50", "r-1")])
        let plan = try store.readSession { session in
            try session.cached("EXPLAIN QUERY PLAN " + StoreSQL.openOrdersOfRider).rows(
                [.text("m-1"), .text("r-1"), .integer(20)]
            ) { try $0.text("detail") }
        }
        #expect(plan.count == 1)
        #expect(plan.first?.contains("USING INDEX orders_open_by_rider") == true, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }
}
