import FoundationEssentials
import Storage
import Synchronization

/// API keys as read from the store, kept for a second: merchants and riders send a key with every
/// request, and reading its row each time was a database read on every status change.
///
/// Only the stored record is kept (its SHA-256, role, owner, revocation), never a presented secret;
/// each request still checks its secret against the record. A revocation through this node's API
/// takes effect at once (`forget`); one through another node or `deliveryd keys revoke` within
/// `lifetime`. Unknown key ids are not kept, so that guessed ids cannot fill the cache; each of its
/// shards holds at most its part of `capacity` keys and starts over when full.
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
    /// Keys that answers from memory authenticated, by when they last did: `refreshHeld` rereads
    /// them off the request path, so that the event loop, which never reads the store, finds them.
    private let held = Mutex<[String: Date]>([:])
    /// At most this many keys are kept held (a dashboard's, a wall screen's), each for a minute.
    static let heldCapacity = 64
    static let heldFor: TimeInterval = 60

    init(lifetime: TimeInterval = 1, capacity: Int = 10_000, shards: Int = 16) {
        self.lifetime = lifetime
        self.shardCapacity = max(1, capacity / max(1, shards))
        self.entries = ShardedMutex(shards: shards) { [:] }
    }

    /// The key's record, from the cache when read less than `lifetime` before `now`, else from `read`.
    func record(
        id: String, now: Date, read: (String) throws(StorageError) -> APIKeyRecord?
    ) throws(StorageError) -> APIKeyRecord? {
        if let record = cachedRecord(id: id, now: now) { return record }
        guard let record = try read(id) else {
            forget(id)
            return nil
        }
        keep(record, as: id, readAt: now)
        return record
    }

    /// Keeps the key read by `refreshHeld` for the next minute: an answer from memory used it.
    func hold(_ id: String, now: Date) {
        held.withLock { held in
            guard held[id] != nil || held.count < Self.heldCapacity else { return }
            held[id] = now
        }
    }

    /// Rereads the held keys and lets go of those unused for a minute: a maintenance job, more often
    /// than `lifetime`. A key that is gone, or that cannot be read now, is dropped: its next request
    /// goes to a handler thread, which reads it.
    func refreshHeld(now: Date, read: (String) throws(StorageError) -> APIKeyRecord?) {
        let ids = held.withLock { held in
            held = held.filter { now.timeIntervalSince($0.value) < Self.heldFor }
            return Array(held.keys)
        }
        for id in ids {
            if let record = (try? read(id)) ?? nil { keep(record, as: id, readAt: now) } else { forget(id) }
        }
    }

    private func keep(_ record: APIKeyRecord, as id: String, readAt now: Date) {
        entries.withLock(for: id) { entries in
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
