public import FoundationEssentials

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A point on Earth in degrees (WGS 84), as phones report it.
///
/// - Important: A rider's coordinates are private twice over: they say where a person is. They are
///   kept in memory only, for the speed estimate, and never stored, logged or projected; what leaves
///   the server is the remaining distance, rounded (`LiveActivityProjector`).
public struct Coordinate: Sendable, Hashable {
    public let latitude: Double
    public let longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The mean radius of the Earth (IUGG), in metres.
    public static let earthRadius = 6_371_008.8

    /// The great-circle distance in metres (haversine), within 0.5 % of the ellipsoid's.
    ///
    /// The road is longer (typically 1.2 to 1.4 times in a city), but the ETA divides this same
    /// measure by the speed at which it shrinks, so the detour factor cancels out of the ETA; the
    /// customer is shown the distance as the crow flies, rounded.
    public func distance(to other: Coordinate) -> Double {
        let φ1 = latitude * .pi / 180
        let φ2 = other.latitude * .pi / 180
        let Δφ = φ2 - φ1
        let Δλ = (other.longitude - longitude) * .pi / 180
        let sinHalfΔφ = sin(Δφ / 2)
        let sinHalfΔλ = sin(Δλ / 2)
        let h = sinHalfΔφ * sinHalfΔφ + cos(φ1) * cos(φ2) * sinHalfΔλ * sinHalfΔλ
        return 2 * Self.earthRadius * asin(min(1, h.squareRoot()))
    }
}

/// One position of a rider's phone.
public struct RiderPosition: Sendable, Hashable {
    public let coordinate: Coordinate
    /// The radius of uncertainty in metres, as Core Location reports it (`horizontalAccuracy`).
    public let accuracy: Double?
    /// When the phone took it (its clock), checked against the server's.
    public let recordedAt: Date

    public init(coordinate: Coordinate, accuracy: Double?, recordedAt: Date) {
        self.coordinate = coordinate
        self.accuracy = accuracy
        self.recordedAt = recordedAt
    }

    /// Checks a position as a rider's app sends it.
    ///
    /// - Throws: `validation_failed` naming every field out of range: latitude −90…90, longitude
    ///   −180…180, accuracy 0…`OrderLimits.positionAccuracy`, `recordedAt` at most
    ///   `OrderLimits.positionClockSkew` ahead of `now` and at most `OrderLimits.positionMaximumAge` old.
    ///   The messages never repeat the values (they say where a person is).
    public static func validated(
        latitude: Double?, longitude: Double?, accuracy: Double?, recordedAt: Date?, now: Date
    ) throws(OrderError) -> RiderPosition {
        var check = FieldChecker()
        let coordinate = check.coordinate(latitude: latitude, longitude: longitude, prefix: "")
        if let accuracy, !(accuracy.isFinite && OrderLimits.positionAccuracy.contains(accuracy)) {
            check.fail(
                "accuracy", "must be a number of metres from 0 to \(Int(OrderLimits.positionAccuracy.upperBound))")
        }
        if let recordedAt {
            if recordedAt > now.addingTimeInterval(OrderLimits.positionClockSkew) {
                check.fail("recordedAt", "must not be in the future")
            } else if recordedAt < now.addingTimeInterval(-OrderLimits.positionMaximumAge) {
                check.fail("recordedAt", "must be at most \(Int(OrderLimits.positionMaximumAge)) seconds old")
            }
        } else {
            check.fail("recordedAt", "is required")
        }
        try check.finish()
        guard let coordinate, let recordedAt else {
            preconditionFailure("a position passed validation without a field")
        }
        return RiderPosition(coordinate: coordinate, accuracy: accuracy, recordedAt: recordedAt)
    }
}

/// What the server knows of a delivery on its way, and keeps with the order: derived from the
/// rider's positions, never the positions themselves.
public struct DeliveryTracking: Sendable, Hashable {
    /// When the newest position used was taken.
    public var positionAt: Date
    /// Metres from the rider to the destination as the crow flies; `nil` without a destination or
    /// before the order is `delivering`.
    public var remainingDistance: Double?
    /// The remaining distance at the first position while delivering: the start of the finer progress.
    public var initialDistance: Double?
    /// The ETA from the rider's recent speed, once there is enough of a ride to tell it.
    public var estimatedArrival: Date?

    public init(positionAt: Date, remainingDistance: Double?, initialDistance: Double?, estimatedArrival: Date?) {
        self.positionAt = positionAt
        self.remainingDistance = remainingDistance
        self.initialDistance = initialDistance
        self.estimatedArrival = estimatedArrival
    }

    /// The share of the ride done, 0…1, or `nil` when there is no distance to measure it by.
    public var rideFraction: Double? {
        guard let remainingDistance, let initialDistance, initialDistance > 0 else { return nil }
        return min(1, max(0, 1 - remainingDistance / initialDistance))
    }
}

/// Turns one order's stream of rider positions into its `DeliveryTracking`: the remaining distance
/// and an ETA from the speed at which that distance shrinks, smoothed and bounded.
///
/// A value type fed positions in order; the caller keeps one per order in memory. Speed is an
/// exponential moving average of the closing speed with a time constant of `smoothing` seconds, so a
/// red light or one jumpy fix moves the ETA a little, a ride that really slows down moves it fully
/// within a minute or two. The ETA assumes at least `minimumSpeed` (a stopped rider still arrives),
/// at most `maximumSpeed` (a GPS jump is not a rocket), and lies at most `horizon` ahead.
public struct RideEstimator: Sendable {
    /// Why a position changed nothing.
    public enum Ignored: String, Sendable, Hashable {
        /// Taken before (or at) the newest position already used: delivered late, out of order.
        case outOfOrder = "out_of_order"
        /// Its accuracy radius is wider than `maximumAccuracy`: it would make the rider jump.
        case inaccurate
    }

    public var smoothing: TimeInterval = 60
    public var minimumSpeed = 1.5
    public var maximumSpeed = 25.0
    public var horizon: TimeInterval = 3 * 3600
    /// Positions less accurate than this (metres) are ignored.
    public var maximumAccuracy = 250.0
    /// Seconds of ride before the speed is trusted for an ETA.
    public var warmUp: TimeInterval = 20

    public private(set) var tracking: DeliveryTracking?
    private var closingSpeed: Double?
    /// The first position of this ride seen by this estimator: the warm-up measures from it.
    private var rideStart: (at: Date, remaining: Double)?

    /// - Parameter resuming: the tracking stored with the order (after a restart), whose initial
    ///   distance the progress keeps counting from.
    public init(resuming tracking: DeliveryTracking? = nil) {
        self.tracking = tracking
    }

    /// Uses one position; `destination` is `nil` when the order has none or is not yet delivering, in
    /// which case only the position's time is kept.
    /// - Returns: why the position was ignored, or `nil` when it was used.
    @discardableResult
    public mutating func record(_ position: RiderPosition, destination: Coordinate?) -> Ignored? {
        if let last = tracking?.positionAt, position.recordedAt <= last { return .outOfOrder }
        if let accuracy = position.accuracy, accuracy > maximumAccuracy { return .inaccurate }
        guard let destination else {
            tracking = DeliveryTracking(
                positionAt: position.recordedAt, remainingDistance: nil, initialDistance: nil, estimatedArrival: nil)
            closingSpeed = nil
            rideStart = nil
            return nil
        }
        let remaining = position.coordinate.distance(to: destination)
        var eta: Date?
        if let rideStart, let previous = tracking, let previousRemaining = previous.remainingDistance {
            let sinceStart = position.recordedAt.timeIntervalSince(rideStart.at)
            if sinceStart < warmUp {
                // The mean over the ride so far: two fixes a fraction of a second apart say nothing of a speed.
                closingSpeed = (rideStart.remaining - remaining) / sinceStart
            } else {
                let elapsed = position.recordedAt.timeIntervalSince(previous.positionAt)
                let speed = (previousRemaining - remaining) / elapsed
                let weight = 1 - exp(-elapsed / smoothing)
                closingSpeed = closingSpeed.map { $0 + weight * (speed - $0) } ?? speed
                let bounded = min(maximumSpeed, max(minimumSpeed, closingSpeed ?? minimumSpeed))
                eta = position.recordedAt.addingTimeInterval(min(horizon, remaining / bounded))
            }
        } else {
            rideStart = (position.recordedAt, remaining)
            closingSpeed = nil
        }
        tracking = DeliveryTracking(
            positionAt: position.recordedAt, remainingDistance: remaining,
            initialDistance: tracking?.initialDistance ?? remaining, estimatedArrival: eta)
        return nil
    }
}
