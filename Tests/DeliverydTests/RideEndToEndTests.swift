import DeliveryActivityContract
import Foundation
import TestScheduling
import TestSupport
import Testing

/// The rider coming closer, through the process, real sockets and the APNs simulator over HTTP/2.
@Suite("Ride end to end: positions to pushes", .serialized, .heavy)
struct RideEndToEndTests {
    static let adminKey = "ride-e2e-admin-key-0123456"
    static let activityToken = String(repeating: "3d", count: 32)
    /// The customer's door; digits unlike any other number the test sends, so a leak is unmistakable.
    static let destination = (latitude: 48.137_154, longitude: 11.576_124)

    /// A point `north` and `east` metres from the destination.
    static func point(north: Double, east: Double) -> (latitude: Double, longitude: Double) {
        let metresPerDegree = Double.pi * 6_371_008.8 / 180
        return (
            destination.latitude + north / metresPerDegree,
            destination.longitude + east / (metresPerDegree * cos(destination.latitude * .pi / 180))
        )
    }

    /// The ride: a polyline of 2.4 km south-west of the door, walked in 80 positions.
    static let polyline: [(north: Double, east: Double)] = [
        (-2_400, -300), (-1_700, 250), (-1_000, -150), (-400, 120), (-60, 20),
    ]

    static func ride(positions: Int) -> [(latitude: Double, longitude: Double)] {
        (0..<positions).map { index in
            let along = Double(index) / Double(positions - 1) * Double(polyline.count - 1)
            let segment = min(polyline.count - 2, Int(along))
            let fraction = along - Double(segment)
            let from = polyline[segment]
            let to = polyline[segment + 1]
            return point(
                north: from.north + (to.north - from.north) * fraction,
                east: from.east + (to.east - from.east) * fraction)
        }
    }

    /// A rider rides the polyline while delivering, posting a position every 150 ms; with a ride push
    /// interval of 1 s the activity's pushes, decoded with the client package's type, show a distance
    /// that falls (never rises) down to `arriving`, a progress that grows, and then the `end`. No
    /// payload and no log line holds a coordinate of the ride or of the door.
    @Test func rideFallsToArrivingThenEnds() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let server = try DeliverydProcess(
            // Positions every 150 ms, faster than a rider app's default allowance (5 a second), to
            // ride the whole polyline in seconds.
            extraArguments: ["--admin-key", Self.adminKey, "--ride-push-interval", "1", "--requests-per-app", "20"]
                + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: simulator)

        let merchant =
            try client.call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-1"], 201)[
                "key"] as! String
        let rider =
            try client.call(
                "POST", "/v1/admin/keys", Self.adminKey, ["role": "rider", "merchantId": "m-1", "riderId": "r-1"], 201)[
                "key"]
            as! String
        var body = EndToEndTests.orderBody("R-1", customer: "c-1", eta: Date().addingTimeInterval(1800))
        body["destination"] = ["latitude": Self.destination.latitude, "longitude": Self.destination.longitude]
        let created = try client.call("POST", "/v1/orders", merchant, body, 201)
        let orderID = (created["order"] as! [String: Any])["id"] as! String
        let token = created["trackingToken"] as! String
        let path = "/v1/orders/\(orderID)"
        try client.call(
            "PUT", path + "/activities/phone", token, ["pushToken": Self.activityToken, "environment": "production"],
            200)
        try client.call("PUT", path + "/rider", merchant, ["riderId": "r-1", "name": "Marco Rossi"], 200)
        try client.call("POST", path + "/status", rider, ["status": "pickup"], 200)
        try client.call("POST", path + "/status", rider, ["status": "delivering"], 200)

        let positions = Self.ride(positions: 80)
        for (index, point) in positions.enumerated() {
            let position: [String: Any] = [
                "latitude": point.latitude, "longitude": point.longitude, "accuracy": 8,
                "recordedAt": EndToEndTests.rfc3339(Date()),
            ]
            // Half through the order's route, half through the rider's: both feed the same ride.
            let route = index % 2 == 0 ? path + "/position" : "/v1/riders/r-1/position"
            let answer = try client.send("POST", route, rider, position)
            try #require(answer.status == 202, "\(route): \(answer.status) \(answer.text)")
            usleep(150_000)
        }
        // Within the interval of the last store, the last positions are still held: wait for arriving.
        let arrived = Date().addingTimeInterval(30)
        func states() throws -> [(event: String, state: DeliveryAttributes.ContentState)] {
            try simulator.records().filter { $0["token"] as? String == Self.activityToken }.map { record in
                let payload = Data((record["payload"] as? String ?? "").utf8)
                let push = try JSONDecoder().decode(ActivityKitPush.self, from: payload)
                return (push.aps.event, push.aps.contentState)
            }
        }
        while try !states().contains(where: { $0.state.arriving }), Date() < arrived { usleep(50_000) }
        try client.call("POST", path + "/status", rider, ["status": "delivered"], 200)
        let ended = Date().addingTimeInterval(30)
        while try !states().contains(where: { $0.event == "end" }), Date() < ended { usleep(50_000) }
        #expect(server.stop() == 0)

        let pushes = try states()
        let ride = pushes.filter { $0.state.status == "delivering" }
        let distances = ride.compactMap(\.state.remainingDistance)
        #expect(distances.count >= 4, "distances pushed: \(distances)")
        #expect(distances.first.map { $0 >= 2_000 } == true, "\(distances)")
        #expect(zip(distances, distances.dropFirst()).allSatisfy { $0 >= $1 }, "the distance rose: \(distances)")
        #expect(ride.last?.state.arriving == true && ride.last?.state.remainingDistance == nil)
        let progress = ride.map(\.state.progress)
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0 <= $1 }, "\(progress)")
        #expect(pushes.last?.event == "end" && pushes.last?.state.status == "delivered")

        // The coordinates, as JSON writes them, to four decimals (about 10 m): in no payload, no log line.
        var needles = Set([Self.destination.latitude, Self.destination.longitude].map { String(format: "%.4f", $0) })
        for point in positions {
            needles.insert(String(format: "%.4f", point.latitude))
            needles.insert(String(format: "%.4f", point.longitude))
        }
        let payloads = try simulator.records().map { $0["payload"] as? String ?? "" }
        let logs = server.standardError() + server.standardOutput()
        #expect(!logs.isEmpty)
        for needle in needles {
            #expect(!payloads.contains { $0.contains(needle) }, "a payload holds \(needle)")
            #expect(!logs.contains(needle), "the log holds \(needle)")
        }
    }
}

/// An update or end push as ActivityKit reads it.
struct ActivityKitPush: Decodable {
    struct APS: Decodable {
        var event: String
        var contentState: DeliveryAttributes.ContentState

        enum CodingKeys: String, CodingKey {
            case event
            case contentState = "content-state"
        }
    }

    var aps: APS
}
