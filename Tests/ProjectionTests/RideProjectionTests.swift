import DeliveryActivityContract
import Foundation
import OrderDomain
import Projection
import Testing

@Suite("The ride in the projection")
struct RideProjectionTests {
    static let destination = Coordinate(latitude: 48.137_154, longitude: 11.576_124)

    static func delivering(
        remaining: Double?, initial: Double? = 5_000, eta: Date? = nil, status: OrderStatus = .delivering
    )
        -> Order
    {
        let base = Fixtures.order(status: status)
        return Order(
            id: base.id, merchantID: base.merchantID, number: base.number, merchantName: base.merchantName,
            items: base.items, customer: base.customer, address: base.address, payment: base.payment, note: base.note,
            status: base.status, cancelledAt: base.cancelledAt, estimatedArrival: base.estimatedArrival,
            rider: base.rider, createdAt: base.createdAt, updatedAt: base.updatedAt, destination: destination,
            tracking: DeliveryTracking(
                positionAt: Fixtures.now, remainingDistance: remaining, initialDistance: initial, estimatedArrival: eta)
        )
    }

    /// Distance in steps of 100 m, `arriving` below 200 m with no distance at all, and the progress
    /// measured by the distance shown.
    @Test func distanceIsRoundedAndArrivingHidesIt() throws {
        let projector = LiveActivityProjector()
        let far = projector.contentState(for: Self.delivering(remaining: 2_449))
        #expect(far.remainingDistance == 2_400 && !far.arriving)
        #expect(far.progress == 0.87)
        #expect(projector.contentState(for: Self.delivering(remaining: 2_450)).remainingDistance == 2_500)
        #expect(projector.contentState(for: Self.delivering(remaining: 200)).remainingDistance == 200)
        let near = projector.contentState(for: Self.delivering(remaining: 199.9))
        #expect(near.remainingDistance == nil && near.arriving)
        #expect(near.progress == 0.99)
        // Further than at the start (a detour): the bar stays at the start of the stage.
        #expect(projector.contentState(for: Self.delivering(remaining: 6_000)).progress == 0.75)
    }

    /// The ride's ETA replaces the merchant's while delivering; before `delivering` (or without a
    /// distance) the ride shows nothing, and the state is what it was before rides existed.
    @Test func rideShowsOnlyWhileDelivering() throws {
        let projector = LiveActivityProjector()
        let eta = Fixtures.now.addingTimeInterval(421)
        let state = projector.contentState(for: Self.delivering(remaining: 3_000, eta: eta))
        #expect(state.estimatedArrival == Date(timeIntervalSince1970: (eta.timeIntervalSince1970 / 60).rounded() * 60))
        for status in [OrderStatus.pickup, .delivered, .cancelled] {
            let order = Self.delivering(remaining: 3_000, eta: eta, status: status)
            #expect(projector.contentState(for: order) == projector.contentState(for: order.tracked(nil)))
        }
        let blind = Self.delivering(remaining: nil, initial: nil)
        #expect(projector.contentState(for: blind) == projector.contentState(for: blind.tracked(nil)))
        let bytes = String(decoding: projector.encode(projector.contentState(for: blind)), as: UTF8.self)
        #expect(!bytes.contains("remainingDistance") && !bytes.contains("arriving"))
    }

    /// The encoded state decodes with the client package's type to the same value, new fields included.
    @Test func encodedStateDecodesWithTheContract() throws {
        let projector = LiveActivityProjector()
        for remaining in [150.0, 1_234] {
            let state = projector.contentState(for: Self.delivering(remaining: remaining))
            let decoded = try JSONDecoder().decode(ContentState.self, from: Data(projector.encode(state)))
            #expect(decoded == state)
            let reencoded = try JSONDecoder().decode(ContentState.self, from: JSONEncoder().encode(state))
            #expect(reencoded == state)
        }
        // A state from a server before rides decodes with no distance, not arriving.
        let old = #"{"estimatedArrival":817907400,"progress":0.5,"stage":2,"status":"pickup","statusText":"Pickup"}"#
        let decoded = try JSONDecoder().decode(ContentState.self, from: Data(old.utf8))
        #expect(decoded.remainingDistance == nil && !decoded.arriving)
    }

    /// 10,000 random rides: the push never holds a coordinate of the destination, nor the exact
    /// distance; the distance shown is within half a step of the true one; nothing below 200 m.
    @Test func noCoordinatesOrExactDistanceLeave() throws {
        var rng = SplitMix64(state: 0x0052_1DE5)
        let planner = PushPlanner()
        let activity = ActivityContext(bundleID: "com.example.app", startedAt: Fixtures.placedAt)
        for iteration in 0..<10_000 {
            let remaining = Double.random(in: 0...40_000, using: &rng)
            let order = Self.delivering(
                remaining: remaining, initial: remaining + Double.random(in: 0...5_000, using: &rng))
            guard case .send(let push) = try planner.planUpdate(order: order, activity: activity, now: Fixtures.now)
            else {
                Issue.record("no push for iteration \(iteration)")
                return
            }
            let payload = String(decoding: push.payload, as: UTF8.self)
            for needle in ["48.137", "11.576", "137154", "576124", String(format: "%.1f", remaining)] {
                #expect(!payload.contains(needle), "iteration \(iteration) leaked \(needle): \(payload)")
            }
            let state = push.contentState
            if remaining < 200 {
                #expect(state.arriving && state.remainingDistance == nil)
            } else {
                let shown = try #require(state.remainingDistance)
                #expect(shown % 100 == 0 && abs(Double(shown) - remaining) <= 50)
            }
            #expect((0.75...0.99).contains(state.progress))
        }
    }
}
