import DeliveryActivityContract
public import FoundationEssentials
public import OrderDomain

/// The knobs of the projection and push plan; every one has the default the design names.
public struct ProjectionConfiguration: Sendable, Hashable {
    /// How long after the ETA the activity turns stale on the device.
    public var staleGrace: TimeInterval = 15 * 60
    /// The least time from now that `stale-date` and `apns-expiration` are set to, on every push:
    /// a late order's activity stays fresh while it moves, and a phone that is offline for a while
    /// still gets the push (the `end` included) when it comes back.
    public var minimumFreshness: TimeInterval = 15 * 60
    /// How long an ended activity stays on the Lock Screen.
    public var dismissalDelay: TimeInterval = 15 * 60
    /// How long iOS lets an activity be updated after it starts.
    public var activityLifetime: TimeInterval = 8 * 3600
    /// Priority-10 pushes allowed per activity per hour before pushes drop to priority 5.
    public var highPriorityBudgetPerHour: Int = 6
    /// ETAs are rounded to this many seconds, so that a move of a few seconds pushes nothing.
    public var estimatedArrivalRounding: TimeInterval = 60
    /// The remaining distance is shown in steps of this many metres, so that it says roughly how far
    /// the rider is and never where.
    public var distanceRounding: Double = 100
    /// Below this many metres the activity says `arriving` and shows no distance at all.
    public var arrivingDistance: Double = 200
    /// Longest merchant name shown, in characters; longer ones are cut with `…`.
    public var merchantNameLimit: Int = 40
    /// Longest rider first name shown.
    public var riderNameLimit: Int = 20
    /// Longest order number shown.
    public var orderNumberLimit: Int = 32
    /// How long before a placed order is due its activity starts: a pre-order for tomorrow starts
    /// then, not now (iOS ends an activity 8 hours after it starts). Preparing starts it at once.
    public var startLeadTime: TimeInterval = 3600

    /// The defaults the design names.
    public init() {}
}

extension ProjectionConfiguration {
    /// When the Live Activity of `order` should start: at once when it is being prepared (or later
    /// in its life), else `startLeadTime` before it is due, and never before `now`.
    public func startTime(of order: Order, now: Date) -> Date {
        guard order.status == .placed else { return now }
        return max(now, order.estimatedArrival.addingTimeInterval(-startLeadTime))
    }
}
