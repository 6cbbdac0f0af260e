import DeliveryAPI
import DeliveryActivityContract
import Foundation
import OrderDomain
import Projection
import Storage
import Synchronization
import TestSupport
import Testing

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) { current = Mutex(start) }

    var now: Date { current.withLock { $0 } }

    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

/// A rider's ride toward a destination due south of it, a point per metre.
enum Ride {
    static let destination = Coordinate(latitude: 52.520_008, longitude: 13.404_954)

    static func point(metresAway metres: Double) -> Coordinate {
        Coordinate(
            latitude: destination.latitude - metres * 180 / (Double.pi * Coordinate.earthRadius),
            longitude: destination.longitude)
    }
}

@Suite("Rides: the throttle, in memory")
struct RideThrottleTests {
    /// An order being delivered by rider r-1, placed at `start`.
    static func delivering(at start: Date, destination: Coordinate?) -> Order {
        Order(
            id: "o-1", merchantID: "m-1", number: "A-1", merchantName: "Pizza Roma", items: [],
            customer: Customer(id: "c-1", name: "Ana", phone: "+49 30 1234567", locale: "en"), address: "Main St 1",
            payment: Payment(method: "cash", brand: nil, last4: nil), note: nil, status: .delivering, cancelledAt: nil,
            estimatedArrival: start.addingTimeInterval(900), rider: Rider(id: "r-1", name: "Marco", phone: nil),
            createdAt: start, updatedAt: start, destination: destination)
    }

    /// A simulated ride of 10 minutes, a position a second, from 4.5 km at 7 m/s: at most 20 stores
    /// push (one per 30 s), each showing a distance that moved; the positions in between coalesce.
    @Test func tenMinuteRidePushesAtMostTwentyTimes() throws {
        let projector = LiveActivityProjector()
        let tracker = RideTracker(projector: projector, interval: 30)
        let start = Date(timeIntervalSince1970: 1_796_212_800)
        let order = Self.delivering(at: start, destination: Ride.destination)
        var pushedDistances: [Int] = []
        var stores = 0
        for second in 0..<600 {
            let now = start.addingTimeInterval(Double(second))
            let position = RiderPosition(
                coordinate: Ride.point(metresAway: 4_500 - 7 * Double(second)), accuracy: 8, recordedAt: now)
            #expect(tracker.record(position, for: order, now: now) == nil)
            // The process takes due rides four times a second.
            for quarter in 0..<4 {
                for update in tracker.takeDue(now: now.addingTimeInterval(Double(quarter) / 4)) {
                    stores += 1
                    guard update.queuesPushes else { continue }
                    let state = projector.contentState(for: order.tracked(update.tracking))
                    let distance = try #require(state.remainingDistance)
                    if let last = pushedDistances.last {
                        #expect(distance < last, "a push whose distance did not move")
                    }
                    pushedDistances.append(distance)
                }
            }
        }
        #expect(pushedDistances.count <= 20 && pushedDistances.count >= 19, "\(pushedDistances)")
        #expect(stores == pushedDistances.count)
        #expect(pushedDistances.first == 4_500 && pushedDistances.last.map { $0 < 900 } == true)
    }

    /// Positions that change nothing the customer sees (an order without a destination) refresh the
    /// stored ride once per interval and push nothing; `all` (at shutdown) takes what is pending at once.
    @Test func unchangedStateStoresWithoutPushing() throws {
        let projector = LiveActivityProjector()
        let tracker = RideTracker(projector: projector, interval: 30)
        let start = Date(timeIntervalSince1970: 1_796_212_800)
        let order = Self.delivering(at: start, destination: nil)
        var stores: [(at: Int, pushes: Bool)] = []
        for second in 0..<95 {
            let now = start.addingTimeInterval(Double(second))
            _ = tracker.record(
                RiderPosition(coordinate: Ride.point(metresAway: 2_000 - Double(second)), accuracy: 5, recordedAt: now),
                for: order, now: now)
            stores += tracker.takeDue(now: now).map { (second, $0.queuesPushes) }
        }
        #expect(stores.map(\.at) == [0, 30, 60, 90])
        #expect(stores.allSatisfy { !$0.pushes })
        let late = start.addingTimeInterval(95)
        _ = tracker.record(
            RiderPosition(coordinate: Ride.point(metresAway: 1_000), accuracy: 5, recordedAt: late), for: order,
            now: late)
        #expect(tracker.takeDue(now: late).isEmpty)
        #expect(tracker.takeDue(now: late, all: true).map(\.tracking.positionAt) == [late])
    }
}

@Suite("Rides over the API")
struct RideAPITests {
    /// The most open orders one rider-wide post moves (`POST /v1/riders/{riderId}/position`).
    static let ridersOrdersPerPost = 20
    let clock = ManualClock(Date())
    let directory = NSTemporaryDirectory() + "rides-" + UUID().uuidString
    let store: any DeliveryStore
    let service: DeliveryService
    let api: APIHarness

    init() throws {
        store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: clock.now))
        let clock = self.clock
        service = DeliveryService(
            store: store, configuration: DeliveryServiceConfiguration(defaultBundleID: "com.example.app"),
            clock: { clock.now })
        api = try APIHarness(router: service.router(), store: store, directory: directory)
    }

    struct Setup {
        let merchant: String
        let rider: String
        let orderID: String
        let trackingToken: String
    }

    /// An order with a destination, rider r-1 assigned, one live activity, `delivering`.
    func deliveringOrder(
        number: String = "A-1", destination: Bool = true, merchant: String? = nil, merchantID: String = "m-1"
    ) throws -> Setup {
        let merchant = try merchant ?? api.key("merchant", merchant: merchantID)
        let rider = try api.key("rider", merchant: merchantID, rider: "r-1")
        var body = APIHarness.orderBody(number: number, now: clock.now)
        if destination {
            body["destination"] = ["latitude": Ride.destination.latitude, "longitude": Ride.destination.longitude]
        }
        let created = try api.send("POST", "/v1/orders", as: merchant, json: body)
        try #require(created.status == 201, "\(created.json)")
        let order = try #require(created.json["order"] as? [String: Any])
        let orderID = try #require(order["id"] as? String)
        let token = try #require(created.json["trackingToken"] as? String)
        try #require(
            try api.send(
                "PUT", "/v1/orders/\(orderID)/rider", as: merchant, json: ["riderId": "r-1", "name": "Marco Rossi"]
            ).status == 200)
        try #require(
            try api.send(
                "PUT", "/v1/orders/\(orderID)/activities/a-1", as: token,
                json: ["pushToken": "aabbccddeeff00112233445566778899", "environment": "production"]
            ).status == 200)
        for status in ["pickup", "delivering"] {
            try #require(
                try api.send("POST", "/v1/orders/\(orderID)/status", as: rider, json: ["status": status]).status == 200)
        }
        return Setup(merchant: merchant, rider: rider, orderID: orderID, trackingToken: token)
    }

    func position(_ metres: Double, secondsAgo: Double = 0, accuracy: Double? = 10) -> [String: Any] {
        let point = Ride.point(metresAway: metres)
        var body: [String: Any] = [
            "latitude": point.latitude, "longitude": point.longitude,
            "recordedAt": APIHarness.rfc3339(clock.now.addingTimeInterval(-secondsAgo)),
        ]
        if let accuracy { body["accuracy"] = accuracy }
        return body
    }

    func contentState(_ path: String, as credential: String) throws -> ContentState {
        let reply = try api.send("GET", path, as: credential)
        try #require(reply.status == 200, "\(reply.json)")
        let object = (reply.json["order"] as? [String: Any]) ?? reply.json
        let state = try #require(object["contentState"])
        return try JSONDecoder().decode(ContentState.self, from: JSONSerialization.data(withJSONObject: state))
    }

    /// A position is answered 202 and written nowhere; the due store writes the ride and queues one
    /// push; the views (staff, live activity, the customer's) then show the rounded distance; the
    /// next positions within 30 s are kept back and stored together once it has passed.
    @Test func positionsBecomeARideAndAPush() throws {
        let setup = try deliveringOrder()
        let path = "/v1/orders/\(setup.orderID)/position"
        // The pushes of the status changes went out: the outbox is empty before the ride.
        let earlier = try store.claimDue(owner: "test", now: clock.now, lease: 60, limit: 100)
        try store.completePushes(earlier.map { PushCompletion(item: $0, outcome: .sent) }, now: clock.now)
        let queuedBefore = try store.outboxDepth().count
        #expect(queuedBefore == 0)
        let reply = try api.send("POST", path, as: setup.rider, json: position(3_120))
        #expect(reply.status == 202, "\(reply.json)")
        #expect(reply.json["position"] as? String == "accepted" && reply.json["orderId"] as? String == setup.orderID)
        #expect(try store.order(id: setup.orderID)?.tracking == nil, "a position alone must not write")

        service.storeDueRides()
        let stored = try #require(try store.order(id: setup.orderID)?.tracking)
        #expect(abs((stored.remainingDistance ?? 0) - 3_120) < 0.5)
        #expect(try store.outboxDepth().count == queuedBefore + 1)

        let live = try contentState("/v1/orders/\(setup.orderID)/live-activity", as: setup.merchant)
        #expect(live.remainingDistance == 3_100 && !live.arriving && live.progress == 0.75)
        #expect(try contentState("/v1/orders/\(setup.orderID)", as: setup.trackingToken) == live)
        let staff =
            try api.send("GET", "/v1/orders/\(setup.orderID)", as: setup.merchant).json["order"] as? [String: Any]
        let ride = try #require(staff?["ride"] as? [String: Any])
        #expect(ride["positionAt"] is String && ride["remainingDistance"] == nil)
        #expect(
            !String(
                decoding: try api.send("GET", "/v1/orders/\(setup.orderID)", as: setup.trackingToken).body,
                as: UTF8.self
            )
            .contains("52.5"), "the customer's view must not hold coordinates")

        for metres in stride(from: 3_000.0, through: 2_000, by: -100) {
            clock.advance(1)
            #expect(try api.send("POST", path, as: setup.rider, json: position(metres)).status == 202)
            service.storeDueRides()
        }
        #expect(abs((try store.order(id: setup.orderID)?.tracking?.remainingDistance ?? 0) - 3_120) < 0.5)
        clock.advance(20)
        service.storeDueRides()
        let later = try #require(try store.order(id: setup.orderID)?.tracking)
        #expect(abs((later.remainingDistance ?? 0) - 2_000) < 0.5)
        let moved = try contentState("/v1/orders/\(setup.orderID)/live-activity", as: setup.merchant)
        #expect(moved.remainingDistance == 2_000 && moved.progress > live.progress)
    }

    /// Bad positions are refused with every field named; late ones (out of order) and inaccurate
    /// ones are accepted but ignored; a delivered order takes none; who may post is the matrix's.
    @Test func positionRules() throws {
        let setup = try deliveringOrder()
        let path = "/v1/orders/\(setup.orderID)/position"
        let bad = try api.send(
            "POST", path, as: setup.rider,
            json: [
                "latitude": 91, "longitude": "east", "accuracy": -3,
                "recordedAt": APIHarness.rfc3339(clock.now.addingTimeInterval(120)),
            ])
        #expect(bad.status == 422)
        #expect(Set(bad.fieldProblems.keys) == ["latitude", "longitude", "accuracy", "recordedAt"])
        let old = try api.send("POST", path, as: setup.rider, json: position(1_000, secondsAgo: 600))
        #expect(old.status == 422 && old.fieldProblems["recordedAt"] != nil)
        #expect(try api.send("POST", path, as: setup.rider, json: [String: Any]()).status == 422)

        #expect(try api.send("POST", path, as: setup.rider, json: position(1_000, secondsAgo: 5)).status == 202)
        let late = try api.send("POST", path, as: setup.rider, json: position(1_100, secondsAgo: 10))
        #expect(late.status == 202 && late.json["position"] as? String == "ignored")
        #expect(late.json["reason"] as? String == "out_of_order")
        let vague = try api.send("POST", path, as: setup.rider, json: position(900, accuracy: 2_000))
        #expect(vague.json["reason"] as? String == "inaccurate")

        #expect(try api.send("POST", path, as: setup.merchant, json: position(900)).errorCode == "forbidden")
        #expect(try api.send("POST", path, as: APIHarness.adminKey, json: position(900)).errorCode == "forbidden")
        let stranger = try api.key("rider", merchant: "m-1", rider: "r-2")
        #expect(try api.send("POST", path, as: stranger, json: position(900)).status == 404)
        #expect(try api.send("POST", "/v1/orders/o_nope/position", as: setup.rider, json: position(900)).status == 404)

        #expect(
            try api.send("POST", "/v1/orders/\(setup.orderID)/status", as: setup.rider, json: ["status": "delivered"])
                .status == 200)
        let closed = try api.send("POST", path, as: setup.rider, json: position(10))
        #expect(closed.status == 409 && closed.errorCode == "order_closed")
        service.storeDueRides(all: true)
        let delivered = try contentState("/v1/orders/\(setup.orderID)/live-activity", as: setup.merchant)
        #expect(delivered.remainingDistance == nil && delivered.progress == 1)
    }

    /// Several positions in one request are used oldest first whatever their order; a bad one is
    /// named by its index; more than 20, or none, are refused.
    @Test func positionsInOneRequest() throws {
        let setup = try deliveringOrder()
        let path = "/v1/orders/\(setup.orderID)/position"
        let batch = [
            "positions": [
                position(2_000, secondsAgo: 1), position(2_300, secondsAgo: 3), position(2_150, secondsAgo: 2),
            ]
        ]
        let reply = try api.send("POST", path, as: setup.rider, json: batch)
        #expect(reply.status == 202 && reply.json["accepted"] as? Int == 3, "\(reply.json)")
        service.storeDueRides()
        #expect(abs((try store.order(id: setup.orderID)?.tracking?.remainingDistance ?? 0) - 2_000) < 0.5)

        var bad = position(1_900)
        bad["latitude"] = "north"
        let refused = try api.send("POST", path, as: setup.rider, json: ["positions": [position(1_950), bad]])
        #expect(refused.status == 422 && Set(refused.fieldProblems.keys) == ["positions[1].latitude"])
        let many = Array(repeating: position(1_900), count: 21)
        #expect(
            try api.send("POST", path, as: setup.rider, json: ["positions": many]).fieldProblems["positions"] != nil)
        #expect(try api.send("POST", path, as: setup.rider, json: ["positions": [Any]()]).status == 422)
        let stale = try api.send("POST", path, as: setup.rider, json: ["positions": [position(2_500, secondsAgo: 5)]])
        #expect(stale.json["position"] as? String == "ignored" && stale.json["accepted"] as? Int == 0)
    }

    /// More rides due at once than one write stores (riders starting a shift): every one is stored,
    /// each with its one push, over several writes.
    @Test func manyDueRidesAreAllStored() throws {
        let first = try deliveringOrder(number: "A-0")
        var orderIDs = [first.orderID]
        for index in 1...(DeliveryService.ridesPerWrite + 8) {
            orderIDs.append(try deliveringOrder(number: "A-\(index)", merchant: first.merchant).orderID)
        }
        let earlier = try store.claimDue(owner: "test", now: clock.now, lease: 60, limit: 1_000)
        try store.completePushes(earlier.map { PushCompletion(item: $0, outcome: .sent) }, now: clock.now)
        for orderID in orderIDs {
            clock.advance(1)  // within the rider key's rate
            let reply = try api.send("POST", "/v1/orders/\(orderID)/position", as: first.rider, json: position(2_500))
            #expect(reply.status == 202, "\(reply.json)")
        }
        service.storeDueRides()
        for orderID in orderIDs {
            #expect(abs((try store.order(id: orderID)?.tracking?.remainingDistance ?? 0) - 2_500) < 0.5, "\(orderID)")
        }
        #expect(try store.outboxDepth().count == orderIDs.count)
    }

    /// One position of a rider moves every open order of that rider, and only that rider's.
    @Test func oneRiderPositionMovesAllItsOrders() throws {
        let first = try deliveringOrder(number: "A-1")
        let second = try deliveringOrder(number: "A-2", merchant: first.merchant)
        let reply = try api.send("POST", "/v1/riders/r-1/position", as: first.rider, json: position(2_500))
        #expect(reply.status == 202, "\(reply.json)")
        let orders = (reply.json["orders"] as? [[String: Any]]) ?? []
        #expect(Set(orders.compactMap { $0["orderId"] as? String }) == [first.orderID, second.orderID])
        service.storeDueRides()
        for orderID in [first.orderID, second.orderID] {
            #expect(
                try contentState("/v1/orders/\(orderID)/live-activity", as: first.merchant).remainingDistance == 2_500)
        }
        #expect(try api.send("POST", "/v1/riders/r-2/position", as: first.rider, json: position(1)).status == 403)
        #expect(try api.send("POST", "/v1/riders/r-1/position", as: first.merchant, json: position(1)).status == 403)
        let idle = try api.key("rider", merchant: "m-1", rider: "r-3")
        let none = try api.send("POST", "/v1/riders/r-3/position", as: idle, json: position(1))
        #expect(none.status == 202 && (none.json["orders"] as? [Any])?.isEmpty == true)
    }

    /// A rider's orders are kept a second between posts, yet a change through the API shows in the
    /// rider's next post at once (the clock does not move here): an order given to the rider, one
    /// taken away, one delivered. A position posted before the order went to another rider moves
    /// nothing when the ride is stored.
    @Test func aRidersOrdersFollowChangesAtOnce() throws {
        func orderIDs(_ reply: APIHarness.Reply) -> Set<String> {
            Set(((reply.json["orders"] as? [[String: Any]]) ?? []).compactMap { $0["orderId"] as? String })
        }
        let first = try deliveringOrder(number: "A-1")
        let post = { try self.api.send("POST", "/v1/riders/r-1/position", as: first.rider, json: self.position(2_500)) }
        #expect(orderIDs(try post()) == [first.orderID])
        let second = try deliveringOrder(number: "A-2", merchant: first.merchant)
        #expect(orderIDs(try post()) == [first.orderID, second.orderID])

        // Given to r-2 after r-1's position: that position is not stored on it.
        try #require(
            try api.send(
                "PUT", "/v1/orders/\(first.orderID)/rider", as: first.merchant, json: ["riderId": "r-2", "name": "Bo"]
            ).status == 200)
        #expect(orderIDs(try post()) == [second.orderID])
        service.storeDueRides()
        #expect(try store.order(id: first.orderID)?.tracking == nil)
        #expect(abs((try store.order(id: second.orderID)?.tracking?.remainingDistance ?? 0) - 2_500) < 0.5)

        try #require(
            try api.send("POST", "/v1/orders/\(second.orderID)/status", as: first.rider, json: ["status": "delivered"])
                .status == 200)
        #expect(orderIDs(try post()).isEmpty)
    }

    /// A rider whose orders are kept is answered on the event loop, from memory, as the pooled
    /// handler would answer; after a change to one of its orders, or with a wrong rider or body, too.
    @Test func aRidersPositionIsAnsweredFromMemoryOnceItsOrdersAreKept() throws {
        func orderIDs(_ reply: APIHarness.Reply?) -> Set<String> {
            Set(((reply?.json["orders"] as? [[String: Any]]) ?? []).compactMap { $0["orderId"] as? String })
        }
        let first = try deliveringOrder(number: "A-1")
        let path = "/v1/riders/r-1/position"
        #expect(
            api.sendFromMemory("POST", path, as: first.rider, json: position(2_640, secondsAgo: 4)) == nil,
            "nothing kept yet")
        // Two seconds older than the next fix (the clock stays: the orders are kept meanwhile).
        #expect(try api.send("POST", path, as: first.rider, json: position(2_620, secondsAgo: 2)).status == 202)
        let remembered = api.sendFromMemory("POST", path, as: first.rider, json: position(2_598))
        #expect(remembered?.status == 202)
        #expect(orderIDs(remembered) == [first.orderID])
        #expect((remembered?.json["orders"] as? [[String: Any]])?.first?["position"] as? String == "accepted")
        service.storeDueRides()
        #expect(abs((try store.order(id: first.orderID)?.tracking?.remainingDistance ?? 0) - 2_598) < 0.5)

        let second = try deliveringOrder(number: "A-2", merchant: first.merchant)
        #expect(api.sendFromMemory("POST", path, as: first.rider, json: position(2_400)) == nil, "a change: read again")
        #expect(
            orderIDs(try api.send("POST", path, as: first.rider, json: position(2_400))) == [
                first.orderID, second.orderID,
            ])
        #expect(
            orderIDs(api.sendFromMemory("POST", path, as: first.rider, json: position(2_300))) == [
                first.orderID, second.orderID,
            ])

        #expect(
            api.sendFromMemory("POST", "/v1/riders/r-2/position", as: first.rider, json: position(1))?.status == 403)
        #expect(api.sendFromMemory("POST", path, as: first.rider, json: ["latitude": "north"])?.status == 422)
        #expect(api.sendFromMemory("POST", path, as: first.merchant, json: position(1))?.status == 403)
    }

    /// Riders are their merchant's own: merchant m-2 naming its rider r-1 on 20 orders of its own
    /// neither crowds m-1's order out of m-1's r-1's posts, nor learns anything of that ride.
    @Test func anotherMerchantsRiderOfTheSameNameIsAnotherRider() throws {
        let own = try deliveringOrder(number: "A-1")
        var crowd: [Setup] = []
        for index in 0..<Self.ridersOrdersPerPost {
            crowd.append(
                try deliveringOrder(number: "B-\(index)", merchant: crowd.first?.merchant, merchantID: "m-2"))
        }
        let reply = try api.send("POST", "/v1/riders/r-1/position", as: own.rider, json: position(2_500))
        #expect(reply.status == 202, "\(reply.json)")
        let moved = (reply.json["orders"] as? [[String: Any]]) ?? []
        #expect(moved.compactMap { $0["orderId"] as? String } == [own.orderID])
        service.storeDueRides()
        #expect(
            try contentState("/v1/orders/\(own.orderID)/live-activity", as: own.merchant).remainingDistance == 2_500)
        for order in crowd {
            #expect(try store.order(id: order.orderID)?.tracking == nil, "m-2's orders saw m-1's rider")
            let view = try api.send("GET", "/v1/orders/\(order.orderID)", as: order.merchant)
            #expect(view.status == 200 && (view.json["order"] as? [String: Any])?["ride"] is NSNull, "\(view.json)")
        }
        // m-2's r-1 reaches none of m-1's order, and its posts move only m-2's orders.
        let stranger = try #require(crowd.last).rider
        for (method, path) in [
            ("GET", "/v1/orders/\(own.orderID)"), ("POST", "/v1/orders/\(own.orderID)/position"),
        ] {
            let body: [String: Any]? = method == "POST" ? position(100) : nil
            #expect(try api.send(method, path, as: stranger, json: body).status == 404, "\(method) \(path)")
        }
        let theirs = try api.send("POST", "/v1/riders/r-1/position", as: stranger, json: position(900))
        #expect(((theirs.json["orders"] as? [[String: Any]]) ?? []).count == Self.ridersOrdersPerPost)
        service.storeDueRides()
        #expect(
            try contentState("/v1/orders/\(own.orderID)/live-activity", as: own.merchant).remainingDistance == 2_500)
    }

    /// A rider key from before riders belonged to merchants, which no migration could bind, is refused
    /// with a message that says what to do, not taken as a rider of every merchant.
    @Test func unboundRiderKeyIsRefused() throws {
        let setup = try deliveringOrder()
        let (key, record) = Credentials.newAPIKey(role: .rider, merchantID: nil, riderID: "r-1", now: clock.now)
        try store.createAPIKey(record)
        let refused = try api.send("GET", "/v1/orders/\(setup.orderID)", as: key)
        #expect(refused.status == 401)
        let message = (refused.json["error"] as? [String: Any])?["message"] as? String
        #expect(message?.contains("belongs to no merchant") == true, "\(refused.json)")
        let created = try api.send(
            "POST", "/v1/admin/keys", as: APIHarness.adminKey, json: ["role": "rider", "riderId": "r-1"])
        #expect(created.status == 422 && created.fieldProblems["merchantId"] != nil)
    }

    /// Without a destination a position refreshes when the rider was last heard of, and pushes nothing.
    @Test func withoutDestinationOnlyTheTimeMoves() throws {
        let setup = try deliveringOrder(destination: false)
        let before = try contentState("/v1/orders/\(setup.orderID)/live-activity", as: setup.merchant)
        let queued = try store.outboxDepth().count
        #expect(
            try api.send("POST", "/v1/orders/\(setup.orderID)/position", as: setup.rider, json: position(800)).status
                == 202)
        service.storeDueRides()
        let tracking = try #require(try store.order(id: setup.orderID)?.tracking)
        #expect(tracking.remainingDistance == nil)
        #expect(abs(tracking.positionAt.timeIntervalSince(clock.now)) < 1, "recordedAt is sent in whole seconds")
        #expect(try store.outboxDepth().count == queued)
        let after = try contentState("/v1/orders/\(setup.orderID)/live-activity", as: setup.merchant)
        #expect(after == before, "\(after) \(before)")
    }
}
