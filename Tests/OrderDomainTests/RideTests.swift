import DeliveryActivityContract
import FoundationEssentials
import OrderDomain
import Testing

@Suite("Rides: positions, distance and ETA")
struct RideTests {
    static let destination = Coordinate(latitude: 52.520_0, longitude: 13.405_0)
    /// One metre north, in degrees of latitude, on the mean sphere.
    static let metreOfLatitude = 180 / (Double.pi * Coordinate.earthRadius)

    /// A point `metres` due south of the destination.
    static func south(_ metres: Double) -> Coordinate {
        Coordinate(latitude: destination.latitude - metres * metreOfLatitude, longitude: destination.longitude)
    }

    static func position(_ metres: Double, at seconds: Double, accuracy: Double? = 10) -> RiderPosition {
        RiderPosition(
            coordinate: south(metres), accuracy: accuracy,
            recordedAt: Fixtures.later.addingTimeInterval(seconds))
    }

    /// Great-circle distances against known figures: a degree of latitude, Berlin to Munich
    /// (504 km), a quarter of the Equator, and zero.
    @Test func greatCircleDistance() {
        let berlin = Coordinate(latitude: 52.5200, longitude: 13.4050)
        let munich = Coordinate(latitude: 48.1351, longitude: 11.5820)
        #expect(abs(berlin.distance(to: munich) - 504_400) < 1_000)
        #expect(abs(berlin.distance(to: munich) - munich.distance(to: berlin)) < 1e-6)
        let degree = Coordinate(latitude: 0, longitude: 0).distance(to: Coordinate(latitude: 1, longitude: 0))
        #expect(abs(degree - 111_195) < 1)
        let quarter = Coordinate(latitude: 0, longitude: 0).distance(to: Coordinate(latitude: 0, longitude: 90))
        #expect(abs(quarter - Double.pi / 2 * Coordinate.earthRadius) < 1)
        #expect(berlin.distance(to: berlin) == 0)
        #expect(abs(Self.south(1_234).distance(to: Self.destination) - 1_234) < 0.01)
        // Across the antimeridian the short way round.
        let west = Coordinate(latitude: 0, longitude: 179.9)
        let east = Coordinate(latitude: 0, longitude: -179.9)
        #expect(abs(west.distance(to: east) - 22_239) < 1)
    }

    /// Positions outside the ranges, from the future or too old are refused with every field named,
    /// and the messages never repeat the coordinates.
    @Test func positionValidation() throws {
        let now = Fixtures.later
        let good = try RiderPosition.validated(
            latitude: 52.5, longitude: 13.4, accuracy: 12, recordedAt: now.addingTimeInterval(-5), now: now)
        #expect(good.coordinate == Coordinate(latitude: 52.5, longitude: 13.4))
        _ = try RiderPosition.validated(
            latitude: -90, longitude: 180, accuracy: nil, recordedAt: now.addingTimeInterval(29), now: now)

        do {
            _ = try RiderPosition.validated(
                latitude: 90.000_1, longitude: -180.123_456, accuracy: -1, recordedAt: now.addingTimeInterval(31),
                now: now)
            Issue.record("accepted a position out of every range")
        } catch {
            #expect(error.code == .validationFailed)
            #expect(Set(error.fieldIssues.map(\.field)) == ["latitude", "longitude", "accuracy", "recordedAt"])
            #expect(!error.message.contains("90.0001") && !error.message.contains("180.123"))
        }
        #expect(throws: OrderError(.validationFailed, "")) {
            try RiderPosition.validated(
                latitude: 1, longitude: 1, accuracy: nil, recordedAt: now.addingTimeInterval(-301), now: now)
        }
        #expect(throws: OrderError(.validationFailed, "")) {
            try RiderPosition.validated(latitude: nil, longitude: 1, accuracy: nil, recordedAt: now, now: now)
        }
        #expect(throws: OrderError(.validationFailed, "")) {
            try RiderPosition.validated(latitude: .nan, longitude: 1, accuracy: nil, recordedAt: now, now: now)
        }
    }

    /// A steady ride at 6 m/s: the remaining distance is exact, the ETA waits for the warm-up and
    /// then says remaining / 6 m/s; the initial distance stays that of the first position.
    @Test func steadyRideGivesDistanceAndETA() throws {
        var estimator = RideEstimator()
        for second in 0...120 {
            #expect(
                estimator.record(
                    Self.position(3_000 - 6 * Double(second), at: Double(second)), destination: Self.destination) == nil
            )
            let tracking = try #require(estimator.tracking)
            #expect(abs((tracking.remainingDistance ?? 0) - (3_000 - 6 * Double(second))) < 0.01)
            #expect(tracking.initialDistance.map { abs($0 - 3_000) < 0.01 } == true)
            if second < 20 { #expect(tracking.estimatedArrival == nil, "ETA before the warm-up at \(second) s") }
        }
        let tracking = try #require(estimator.tracking)
        let eta = try #require(tracking.estimatedArrival)
        // 2,280 m left at 6 m/s: 380 s after the last position.
        #expect(abs(eta.timeIntervalSince(tracking.positionAt) - 380) < 1)
        #expect(abs((tracking.rideFraction ?? 0) - 0.24) < 0.001)
    }

    /// The speed is smoothed: a minute at a red light moves the ETA, but bounded by the least speed;
    /// a GPS jump of a kilometre in a second is held to the greatest speed; no ETA beyond the horizon.
    @Test func etaIsSmoothedAndBounded() throws {
        var estimator = RideEstimator()
        for second in 0...60 {
            estimator.record(
                Self.position(3_000 - 6 * Double(second), at: Double(second)), destination: Self.destination)
        }
        let moving = try #require(estimator.tracking?.estimatedArrival)
        for second in 61...120 {
            estimator.record(Self.position(2_640, at: Double(second)), destination: Self.destination)
        }
        let stopped = try #require(estimator.tracking)
        let stoppedETA = try #require(stopped.estimatedArrival)
        #expect(stoppedETA.timeIntervalSince(moving) > 60, "standing still for a minute must push the ETA back")
        #expect(stoppedETA.timeIntervalSince(stopped.positionAt) <= 2_640 / estimator.minimumSpeed + 0.5)

        var jumpy = RideEstimator()
        for second in 0...30 {
            jumpy.record(Self.position(20_000 - 6 * Double(second), at: Double(second)), destination: Self.destination)
        }
        jumpy.record(Self.position(5_000, at: 31), destination: Self.destination)
        let jumped = try #require(jumpy.tracking)
        let jumpedETA = try #require(jumped.estimatedArrival)
        #expect(jumpedETA.timeIntervalSince(jumped.positionAt) >= 5_000 / jumpy.maximumSpeed - 0.5)

        var far = RideEstimator()
        for second in 0...30 {
            far.record(Self.position(500_000, at: Double(second)), destination: Self.destination)
        }
        let farETA = try #require(far.tracking?.estimatedArrival)
        #expect(farETA.timeIntervalSince(Fixtures.later.addingTimeInterval(30)) <= far.horizon)
    }

    /// Positions out of order and inaccurate ones change nothing; a position without a destination
    /// (or before `delivering`) keeps only its time.
    @Test func ignoredPositions() throws {
        var estimator = RideEstimator()
        #expect(estimator.record(Self.position(1_000, at: 10), destination: Self.destination) == nil)
        let before = estimator.tracking
        #expect(estimator.record(Self.position(900, at: 5), destination: Self.destination) == .outOfOrder)
        #expect(estimator.record(Self.position(900, at: 10), destination: Self.destination) == .outOfOrder)
        #expect(
            estimator.record(Self.position(900, at: 11, accuracy: 800), destination: Self.destination) == .inaccurate)
        #expect(estimator.tracking == before)

        var blind = RideEstimator()
        #expect(blind.record(Self.position(1_000, at: 10), destination: nil) == nil)
        #expect(
            blind.tracking
                == DeliveryTracking(
                    positionAt: Fixtures.later.addingTimeInterval(10), remainingDistance: nil, initialDistance: nil,
                    estimatedArrival: nil))
    }

    /// After a restart the stored ride goes on: its initial distance stays, the speed starts again.
    @Test func resumesFromTheStoredRide() throws {
        let stored = DeliveryTracking(
            positionAt: Fixtures.later, remainingDistance: 2_000, initialDistance: 4_000,
            estimatedArrival: Fixtures.later.addingTimeInterval(300))
        var estimator = RideEstimator(resuming: stored)
        #expect(estimator.record(Self.position(1_990, at: -1), destination: Self.destination) == .outOfOrder)
        #expect(estimator.record(Self.position(1_900, at: 10), destination: Self.destination) == nil)
        let tracking = try #require(estimator.tracking)
        #expect(tracking.initialDistance == 4_000)
        #expect(tracking.estimatedArrival == nil, "no speed is known yet after a restart")
    }

    /// Positions are the assigned rider's to post, on open orders only.
    @Test func whoMayPostPositions() throws {
        let order = Fixtures.order(status: .delivering)
        try order.checkPositionAllowed(for: .rider(id: "r-7", merchantID: "m-1"))
        #expect(throws: OrderError(.notFound, "")) {
            try order.checkPositionAllowed(for: .rider(id: "r-8", merchantID: "m-1"))
        }
        #expect(throws: OrderError(.notFound, "")) { try order.checkPositionAllowed(for: .merchant(id: "m-2")) }
        #expect(throws: OrderError(.forbidden, "")) { try order.checkPositionAllowed(for: .merchant(id: "m-1")) }
        #expect(throws: OrderError(.forbidden, "")) { try order.checkPositionAllowed(for: .admin) }
        #expect(throws: OrderError(.orderClosed, "")) {
            try Fixtures.order(status: .delivered).checkOpen()
        }
    }

    /// A destination at creation is optional, and held to the coordinate ranges.
    @Test func draftDestination() throws {
        var draft = Fixtures.draft()
        let plain = try draft.validated(id: "o-1", merchantID: "m-1", by: .merchant(id: "m-1"), at: Fixtures.placedAt)
        #expect(plain.order.destination == nil)
        draft.destination = .init(latitude: 52.52, longitude: 13.405)
        let placed = try draft.validated(id: "o-1", merchantID: "m-1", by: .merchant(id: "m-1"), at: Fixtures.placedAt)
        #expect(placed.order.destination == Coordinate(latitude: 52.52, longitude: 13.405))
        draft.destination = .init(latitude: 95, longitude: nil)
        do {
            _ = try draft.validated(id: "o-1", merchantID: "m-1", by: .merchant(id: "m-1"), at: Fixtures.placedAt)
            Issue.record("accepted a destination out of range")
        } catch {
            #expect(Set(error.fieldIssues.map(\.field)) == ["destination.latitude", "destination.longitude"])
        }
    }
}
