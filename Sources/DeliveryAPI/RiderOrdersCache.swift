import FoundationEssentials
import OrderDomain
import Storage

/// Riders' open orders as read from the store, kept for `lifetime`. A rider's app posts its position
/// every few seconds, each post needs the rider's open orders, and reading them was most of what a
/// position cost; kept for a second only, nearly every post of a rider posting once a second or
/// less often read them again, on a handler thread.
///
/// A change through this node to an order with a rider (its status, its ETA, its rider) forgets the
/// riders concerned when it commits (`forget`), and a read that a forget overtook is not kept; a
/// change through another node is seen within `lifetime` (which is why several nodes keep them a
/// second, and one node alone on SQLite half a minute). Meanwhile the ride store moves only orders
/// still open and still the posting rider's, so a late position moves nothing it should not.
/// Each shard holds at most its part of `capacity` riders and starts over when full; `dropExpired`,
/// run with the ride stores, lets go of what expired, so that no order (with its customer's
/// details) stays in memory long after its rider stopped posting.
final class RiderOrdersCache: Sendable {
    private struct Rider: Hashable {
        let merchantID: String
        let riderID: String
    }

    private struct Entry {
        let orders: [Order]
        let readAt: Date
    }

    private struct Shard {
        var entries: [Rider: Entry] = [:]
        /// Forgets so far: a read that began before one is not kept, whichever rider it forgot.
        var forgets = 0
    }

    private let lifetime: TimeInterval
    private let shardCapacity: Int
    private let shards: ShardedMutex<Shard>

    init(lifetime: TimeInterval = 1, capacity: Int = 10_000, shards: Int = 16) {
        self.lifetime = lifetime
        self.shardCapacity = max(1, capacity / max(1, shards))
        self.shards = ShardedMutex(shards: shards) { Shard() }
    }

    /// The rider's open orders, from memory when read less than `lifetime` before `now`, else from `read`.
    func orders(
        merchantID: String, riderID: String, now: Date, read: () throws(StorageError) -> [Order]
    ) throws(StorageError) -> [Order] {
        let rider = Rider(merchantID: merchantID, riderID: riderID)
        let (cached, forgets) = shards.withLock(for: rider) { shard in
            (fresh(shard.entries[rider], now: now), shard.forgets)
        }
        if let cached { return cached }
        let orders = try read()
        shards.withLock(for: rider) { shard in
            guard shard.forgets == forgets else { return }
            if shard.entries.count >= shardCapacity { shard.entries.removeAll(keepingCapacity: true) }
            shard.entries[rider] = Entry(orders: orders, readAt: now)
        }
        return orders
    }

    /// The rider's open orders when read less than `lifetime` before `now`; `nil` otherwise.
    func cachedOrders(merchantID: String, riderID: String, now: Date) -> [Order]? {
        let rider = Rider(merchantID: merchantID, riderID: riderID)
        return shards.withLock(for: rider) { shard in fresh(shard.entries[rider], now: now) }
    }

    private func fresh(_ entry: Entry?, now: Date) -> [Order]? {
        guard let entry, now >= entry.readAt, now.timeIntervalSince(entry.readAt) < lifetime else { return nil }
        return entry.orders
    }

    /// Riders whose orders are kept, expired or not.
    var keptRiders: Int {
        var count = 0
        shards.forEachShard { count += $0.entries.count }
        return count
    }

    /// Lets go of every rider's orders read `lifetime` or more before `now`.
    func dropExpired(now: Date) {
        shards.forEachShard { shard in
            shard.entries = shard.entries.filter { fresh($0.value, now: now) != nil }
        }
    }

    /// Drops what is kept of the rider's orders: one of them changed.
    func forget(merchantID: String, riderID: String) {
        let rider = Rider(merchantID: merchantID, riderID: riderID)
        shards.withLock(for: rider) { shard in
            shard.entries[rider] = nil
            shard.forgets &+= 1
        }
    }
}
