public import FoundationEssentials
public import OrderDomain
public import Projection
public import Storage
import Synchronization

/// Riders' positions in memory, turned into stored rides and pushes within Apple's budget.
///
/// A rider's app posts several positions a second; each is checked and fed to its order's
/// `RideEstimator` here, in memory, and answered at once: no position is a transaction of its own.
/// `takeDue` hands out, for each order whose ride moved, only its newest state (positions coalesce),
/// and at most once per `interval` per order (default 30 s; the first at once). Each of those is
/// stored, and pushed when what the customer sees changed, in one transaction for all orders due.
///
/// A crash loses the positions since the last store of each order (at most `interval` of them) and
/// the speed estimate, both rebuilt from the rider's next positions; the remaining distance and ETA
/// already stored and pushed stay. Status changes are never held here: they are written when asked.
public final class RideTracker: Sendable {
    /// Why a position moved nothing: the estimator's reasons.
    public typealias Ignored = RideEstimator.Ignored

    private struct Ride {
        var estimator: RideEstimator
        /// The order's status the estimator was started under: a new status starts a new ride.
        var status: OrderStatus
        /// What the customer was last shown of this order, as far as the tracker knows.
        var shown: ContentState
        /// The order's state without the ride, and the `updatedAt` of the order it was projected from.
        var base: ContentState
        var baseOf: Date
        var storedAt: Date?
        /// The newest state not stored yet, and the rider whose position made it.
        var pending: (tracking: DeliveryTracking, state: ContentState, riderID: String)?
        var lastPositionAt: Date
    }

    private struct Shard {
        var rides: [String: Ride] = [:]
        var pendingOrders: Set<String> = []
        var lastSweep = Date.distantPast
    }

    /// The least time between two stores (and pushes) of one order's ride.
    public let interval: TimeInterval
    /// Rides without a position for this long are forgotten (the stored ride stays).
    public let idleLifetime: TimeInterval
    private let projector: LiveActivityProjector
    /// Rides by a hash of their order id, each shard under its own lock: the handler threads feed
    /// positions side by side (one lock for all made them queue: 9 % of the CPU in the lock's slow
    /// path, positions alone). Projections run outside the locks.
    private let shards: ShardedMutex<Shard>
    /// Held while due rides are stored, so that two stores never race (an older state committed
    /// after a newer one); its value says whether the last store failed, to log a failure once.
    private let storing = Mutex(false)
    /// Positions by outcome: counted without a lock, read by the metrics collector.
    private let accepted = Atomic<Int>(0)
    private let outOfOrder = Atomic<Int>(0)
    private let inaccurate = Atomic<Int>(0)

    public init(
        projector: LiveActivityProjector, interval: TimeInterval = 30, idleLifetime: TimeInterval = 600,
        shards: Int = 16
    ) {
        self.projector = projector
        self.interval = interval
        self.idleLifetime = idleLifetime
        self.shards = ShardedMutex(shards: shards) { Shard() }
    }

    /// Feeds one checked position of `order`'s rider (the order as stored, open and assigned).
    /// - Returns: why it was ignored, or `nil` when it was used.
    public func record(_ position: RiderPosition, for order: Order, now: Date) -> Ignored? {
        let ignored = feed(position, for: order, now: now)
        switch ignored {
        case nil: accepted.wrappingAdd(1, ordering: .relaxed)
        case .outOfOrder?: outOfOrder.wrappingAdd(1, ordering: .relaxed)
        case .inaccurate?: inaccurate.wrappingAdd(1, ordering: .relaxed)
        }
        return ignored
    }

    /// Positions recorded so far, by outcome (`accepted` or an `Ignored` raw value).
    public var positionCounts: [(outcome: String, count: Int)] {
        [
            ("accepted", accepted.load(ordering: .relaxed)),
            (Ignored.outOfOrder.rawValue, outOfOrder.load(ordering: .relaxed)),
            (Ignored.inaccurate.rawValue, inaccurate.load(ordering: .relaxed)),
        ]
    }

    private func feed(_ position: RiderPosition, for order: Order, now: Date) -> Ignored? {
        let cached = shards.withLock(for: order.id) { shard in
            shard.rides[order.id].flatMap { $0.status == order.status && $0.baseOf == order.updatedAt ? $0.base : nil }
        }
        let base = cached ?? projector.baseContentState(for: order)
        // What the customer sees of the stored order: a new ride pushes only news.
        let shownBefore = projector.withRide(of: order, on: base)
        let recorded = shards.withLock(for: order.id) { shard -> (ignored: Ignored?, tracking: DeliveryTracking?) in
            var ride: Ride
            if let known = shard.rides[order.id], known.status == order.status {
                ride = known
                ride.base = base
                ride.baseOf = order.updatedAt
            } else {
                ride = Ride(
                    estimator: RideEstimator(resuming: order.tracking), status: order.status, shown: shownBefore,
                    base: base, baseOf: order.updatedAt, storedAt: nil, pending: nil, lastPositionAt: now)
            }
            let ignored = ride.estimator.record(position, destination: order.rideDestination)
            if ignored == nil { ride.lastPositionAt = now }
            shard.rides[order.id] = ride
            return (ignored, ignored == nil ? ride.estimator.tracking : nil)
        }
        guard recorded.ignored == nil, let tracking = recorded.tracking else { return recorded.ignored }
        let state = projector.withRide(of: order.tracked(tracking), on: base)
        shards.withLock(for: order.id) { shard in
            // A newer position that overtook this one meanwhile leaves its own state instead.
            guard var ride = shard.rides[order.id], ride.estimator.tracking == tracking else { return }
            ride.pending = (tracking, state, order.rider?.id ?? "")
            shard.rides[order.id] = ride
            shard.pendingOrders.insert(order.id)
        }
        return nil
    }

    /// The rides to store now: every order with news whose last store is at least `interval` ago
    /// (or never), each with its newest state; `all` takes every one with news (at shutdown).
    /// Taking marks them stored; a failed store is undone with `forget`.
    public func takeDue(now: Date, all: Bool = false) -> [RideUpdate] {
        var updates: [RideUpdate] = []
        shards.forEachShard { shard in
            var taken: [String] = []
            for orderID in shard.pendingOrders {
                guard var ride = shard.rides[orderID], let pending = ride.pending else {
                    taken.append(orderID)
                    continue
                }
                if !all, let storedAt = ride.storedAt, now.timeIntervalSince(storedAt) < interval { continue }
                updates.append(
                    RideUpdate(
                        orderID: orderID, riderID: pending.riderID, tracking: pending.tracking,
                        queuesPushes: pending.state != ride.shown))
                ride.shown = pending.state
                ride.storedAt = now
                ride.pending = nil
                shard.rides[orderID] = ride
                taken.append(orderID)
            }
            for orderID in taken { shard.pendingOrders.remove(orderID) }
            if now.timeIntervalSince(shard.lastSweep) >= idleLifetime / 10 {
                shard.lastSweep = now
                shard.rides = shard.rides.filter {
                    $0.value.pending != nil || now.timeIntervalSince($0.value.lastPositionAt) < idleLifetime
                }
            }
        }
        return updates
    }

    /// Drops what is known of these orders' rides (their store failed): the next position starts
    /// again from the order as stored.
    public func forget(_ orderIDs: some Sequence<String>) {
        for orderID in orderIDs {
            shards.withLock(for: orderID) { shard in
                shard.rides[orderID] = nil
                shard.pendingOrders.remove(orderID)
            }
        }
    }

    /// Takes the due rides (`takeDue`) and hands them to `store`; a throwing store forgets them.
    /// - Returns: how the store went, with whether a failure is the first of a row or a success the
    ///   first after failures, so that a full disk is said once and its recovery once.
    public func storeDue(now: Date, all: Bool = false, _ store: ([RideUpdate]) throws -> Void) -> RideStoreOutcome {
        storing.withLock { failing in
            let updates = takeDue(now: now, all: all)
            guard !updates.isEmpty else { return .nothingDue }
            do {
                try store(updates)
            } catch {
                forget(updates.map(\.orderID))
                defer { failing = true }
                return .failed(error, first: !failing)
            }
            defer { failing = false }
            return .stored(updates.count, recovered: failing)
        }
    }

    /// Rides kept in memory.
    public var count: Int {
        var total = 0
        shards.forEachShard { total += $0.rides.count }
        return total
    }
}

/// What one `RideTracker.storeDue` did.
public enum RideStoreOutcome {
    case nothingDue
    case stored(Int, recovered: Bool)
    case failed(any Error, first: Bool)
}
