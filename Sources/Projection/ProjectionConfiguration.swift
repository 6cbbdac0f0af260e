import DeliveryActivityContract
public import FoundationEssentials
public import OrderDomain

/// The knobs of the projection and push plan; every one has the default the design names.
public struct ProjectionConfiguration: Sendable, Hashable {
    /// How long after the ETA the activity turns stale on the device.
    public var staleGrace: TimeInterval
    /// The least time from now that `stale-date` and `apns-expiration` are set to, on every push:
    /// a late order's activity stays fresh while it moves, and a phone that is offline for a while
    /// still gets the push (the `end` included) when it comes back.
    public var minimumFreshness: TimeInterval
    /// How long an ended activity stays on the Lock Screen.
    public var dismissalDelay: TimeInterval
    /// How long iOS lets an activity be updated after it starts.
    public var activityLifetime: TimeInterval
    /// Priority-10 pushes allowed per activity per hour before pushes drop to priority 5.
    public var highPriorityBudgetPerHour: Int
    /// ETAs are rounded to this many seconds, so that a move of a few seconds pushes nothing.
    public var estimatedArrivalRounding: TimeInterval
    /// The remaining distance is shown in steps of this many metres, so that it says roughly how far
    /// the rider is and never where.
    public var distanceRounding: Double
    /// Below this many metres the activity says `arriving` and shows no distance at all.
    public var arrivingDistance: Double
    /// Longest merchant name shown, in characters; longer ones are cut with `…`.
    public var merchantNameLimit: Int
    /// Longest rider first name shown.
    public var riderNameLimit: Int
    /// Longest order number shown.
    public var orderNumberLimit: Int
    /// How long before a placed order is due its activity starts: a pre-order for tomorrow starts
    /// then, not now (iOS ends an activity 8 hours after it starts). Preparing starts it at once.
    public var startLeadTime: TimeInterval

    /// - Parameters:
    ///   - staleGrace: default 15 minutes.
    ///   - minimumFreshness: default 15 minutes.
    ///   - dismissalDelay: default 15 minutes.
    ///   - activityLifetime: default 8 hours, as iOS enforces.
    ///   - highPriorityBudgetPerHour: default 6.
    ///   - estimatedArrivalRounding: default 60 seconds.
    ///   - distanceRounding: default 100 m; `arrivingDistance` 200 m.
    ///   - merchantNameLimit: default 40; `riderNameLimit` 20; `orderNumberLimit` 32.
    ///   - startLeadTime: default 1 hour.
    public init(
        staleGrace: TimeInterval = 15 * 60,
        minimumFreshness: TimeInterval = 15 * 60,
        dismissalDelay: TimeInterval = 15 * 60,
        activityLifetime: TimeInterval = 8 * 3600,
        highPriorityBudgetPerHour: Int = 6,
        estimatedArrivalRounding: TimeInterval = 60,
        distanceRounding: Double = 100,
        arrivingDistance: Double = 200,
        merchantNameLimit: Int = 40,
        riderNameLimit: Int = 20,
        orderNumberLimit: Int = 32,
        startLeadTime: TimeInterval = 3600
    ) {
        self.startLeadTime = startLeadTime
        self.staleGrace = staleGrace
        self.minimumFreshness = minimumFreshness
        self.dismissalDelay = dismissalDelay
        self.activityLifetime = activityLifetime
        self.highPriorityBudgetPerHour = highPriorityBudgetPerHour
        self.estimatedArrivalRounding = estimatedArrivalRounding
        self.distanceRounding = distanceRounding
        self.arrivingDistance = arrivingDistance
        self.merchantNameLimit = merchantNameLimit
        self.riderNameLimit = riderNameLimit
        self.orderNumberLimit = orderNumberLimit
    }
}

extension ProjectionConfiguration {
    /// When the Live Activity of `order` should start: at once when it is being prepared (or later
    /// in its life), else `startLeadTime` before it is due, and never before `now`.
    public func startTime(of order: Order, now: Date) -> Date {
        guard order.status == .placed else { return now }
        return max(now, order.estimatedArrival.addingTimeInterval(-startLeadTime))
    }
}
