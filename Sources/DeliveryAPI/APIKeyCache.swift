import FoundationEssentials
import Storage
import Synchronization

/// API keys as read from the store, kept until a stored key changes anywhere.
///
/// Merchants and riders send a key with every request. Kept for a second, a key was read again by
/// nearly every post of a rider's app (one every few seconds), on a handler thread: with 1,000
/// riders posting once a second beside status changes, that was most of what made the status
/// changes 10–20 % slower (`bench/rides.sh`). Records are now kept for `lifetime`, and the store's
/// key generation (`DeliveryStore.apiKeyGeneration`, moved by a trigger on every change to a stored
/// key, through any node or `deliveryd keys revoke`) is read twice a second by `confirm`: when it
/// moved, or cannot be read, the cache is emptied. A revocation through this node's API takes effect
/// at once (`forget`).
///
/// Only the stored record is kept (its SHA-256, role, owner, revocation), never a presented secret;
/// each request still checks its secret against the record. Unknown key ids are not kept, so that
/// guessed ids cannot fill the cache; each of its shards holds at most its part of `capacity` keys
/// and starts over when full.
final class APIKeyCache: Sendable {
    private struct Entry {
        let record: APIKeyRecord
        let readAt: Date
    }

    private let lifetime: TimeInterval
    private let shardCapacity: Int
    /// Every request looks its key up here, from every handler thread and event loop: one lock for
    /// all was 11 % of the CPU of positions alone in its slow path.
    private let entries: ShardedMutex<[String: Entry]>
    /// Moved by every emptying: a record read before one is not kept after it (its read may have
    /// seen the key before the change that emptied the cache).
    private let epoch = Atomic<Int>(0)
    /// The key generation `confirm` last saw; `nil` before the first, or after a failed read.
    private let generation = Mutex<Int64?>(nil)

    init(lifetime: TimeInterval = 300, capacity: Int = 10_000, shards: Int = 16) {
        self.lifetime = lifetime
        self.shardCapacity = max(1, capacity / max(1, shards))
        self.entries = ShardedMutex(shards: shards) { [:] }
    }

    /// The key's record, from the cache when read less than `lifetime` before `now`, else from `read`.
    func record(
        id: String, now: Date, read: (String) throws(StorageError) -> APIKeyRecord?
    ) throws(StorageError) -> APIKeyRecord? {
        if let record = cachedRecord(id: id, now: now) { return record }
        let epochOfRead = epoch.load(ordering: .acquiring)
        guard let record = try read(id) else {
            forget(id)
            return nil
        }
        keep(record, as: id, readAt: now, epochOfRead: epochOfRead)
        return record
    }

    /// Compares the store's key generation (`read`, a maintenance job, twice a second) with the one
    /// seen before, and empties the cache when it moved, when it is the first seen (a key read
    /// earlier may predate a change), or when it cannot be read (a change then goes unseen).
    /// - Returns: whether the cache was emptied.
    @discardableResult
    func confirm(read: () throws(StorageError) -> Int64) -> Bool {
        generation.withLock { seen in
            let current = try? read()
            guard current == nil || current != seen else { return false }
            seen = current
            empty()
            return true
        }
    }

    private func empty() {
        // The epoch moves first: a read that began before this keeps nothing, whether its `keep`
        // reaches its shard before the shard is emptied (then emptied) or after (then refused).
        epoch.wrappingAdd(1, ordering: .releasing)
        entries.forEachShard { $0.removeAll(keepingCapacity: true) }
    }

    private func keep(_ record: APIKeyRecord, as id: String, readAt now: Date, epochOfRead: Int) {
        entries.withLock(for: id) { entries in
            guard epoch.load(ordering: .acquiring) == epochOfRead else { return }
            if entries.count >= shardCapacity { entries.removeAll(keepingCapacity: true) }
            entries[id] = Entry(record: record, readAt: now)
        }
    }

    /// The key's record when it was read less than `lifetime` before `now`; `nil` otherwise.
    func cachedRecord(id: String, now: Date) -> APIKeyRecord? {
        guard let entry = entries.withLock(for: id, { $0[id] }), now >= entry.readAt,
            now.timeIntervalSince(entry.readAt) < lifetime
        else { return nil }
        return entry.record
    }

    /// Drops the key, so that its next use reads the store (after a revocation).
    func forget(_ id: String) {
        _ = entries.withLock(for: id) { $0.removeValue(forKey: id) }
    }
}
