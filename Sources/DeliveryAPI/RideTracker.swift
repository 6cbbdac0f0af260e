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
        var storedAt: Date?
        var pending: (tracking: DeliveryTracking, state: ContentState)?
        var lastPositionAt: Date
    }

    private struct State {
        var rides: [String: Ride] = [:]
        var pendingOrders: Set<String> = []
        var lastSweep = Date.distantPast
    }

    /// The least time between two stores (and pushes) of one order's ride.
    public let interval: TimeInterval
    /// Rides without a position for this long are forgotten (the stored ride stays).
    public let idleLifetime: TimeInterval
    private let projector: LiveActivityProjector
    private let state = Mutex(State())
    /// Held while due rides are stored, so that two stores never race (an older state committed
    /// after a newer one); its value says whether the last store failed, to log a failure once.
    private let storing = Mutex(false)

    public init(projector: LiveActivityProjector, interval: TimeInterval = 30, idleLifetime: TimeInterval = 600) {
        self.projector = projector
        self.interval = interval
        self.idleLifetime = idleLifetime
    }

    /// Feeds one checked position of `order`'s rider (the order as stored, open and assigned).
    /// - Returns: why it was ignored, or `nil` when it was used.
    public func record(_ position: RiderPosition, for order: Order, now: Date) -> Ignored? {
        state.withLock { state in
            var ride =
                state.rides[order.id].flatMap { $0.status == order.status ? $0 : nil }
                ?? Ride(
                    estimator: RideEstimator(resuming: order.tracking), status: order.status,
                    shown: projector.contentState(for: order), storedAt: nil, pending: nil, lastPositionAt: now)
            if let ignored = ride.estimator.record(position, destination: order.rideDestination) {
                state.rides[order.id] = ride
                return ignored
            }
            ride.lastPositionAt = now
            if let tracking = ride.estimator.tracking {
                ride.pending = (tracking, projector.contentState(for: order.tracked(tracking)))
                state.pendingOrders.insert(order.id)
            }
            state.rides[order.id] = ride
            return nil
        }
    }

    /// The rides to store now: every order with news whose last store is at least `interval` ago
    /// (or never), each with its newest state; `all` takes every one with news (at shutdown).
    /// Taking marks them stored; a failed store is undone with `forget`.
    public func takeDue(now: Date, all: Bool = false) -> [RideUpdate] {
        state.withLock { state in
            var updates: [RideUpdate] = []
            for orderID in state.pendingOrders {
                guard var ride = state.rides[orderID], let pending = ride.pending else { continue }
                if !all, let storedAt = ride.storedAt, now.timeIntervalSince(storedAt) < interval { continue }
                updates.append(
                    RideUpdate(orderID: orderID, tracking: pending.tracking, queuesPushes: pending.state != ride.shown))
                ride.shown = pending.state
                ride.storedAt = now
                ride.pending = nil
                state.rides[orderID] = ride
            }
            for update in updates { state.pendingOrders.remove(update.orderID) }
            if now.timeIntervalSince(state.lastSweep) >= idleLifetime / 10 {
                state.lastSweep = now
                state.rides = state.rides.filter {
                    $0.value.pending != nil || now.timeIntervalSince($0.value.lastPositionAt) < idleLifetime
                }
            }
            return updates
        }
    }

    /// Drops what is known of these orders' rides (their store failed): the next position starts
    /// again from the order as stored.
    public func forget(_ orderIDs: some Sequence<String>) {
        state.withLock { state in
            for orderID in orderIDs {
                state.rides[orderID] = nil
                state.pendingOrders.remove(orderID)
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
    public var count: Int { state.withLock { $0.rides.count } }
}

/// What one `RideTracker.storeDue` did.
public enum RideStoreOutcome {
    case nothingDue
    case stored(Int, recovered: Bool)
    case failed(any Error, first: Bool)
}
