import FoundationEssentials
import Storage
import Synchronization

/// API keys as read from the store, kept for a second: merchants and riders send a key with every
/// request, and reading its row each time was a database read on every status change.
///
/// Only the stored record is kept (its SHA-256, role, owner, revocation), never a presented secret;
/// each request still checks its secret against the record. A revocation through this node's API
/// takes effect at once (`forget`); one through another node or `deliveryd keys revoke` within
/// `lifetime`. Unknown key ids are not kept, so that guessed ids cannot fill the cache; the cache
/// holds at most `capacity` keys and starts over when full.
final class APIKeyCache: Sendable {
    private struct Entry {
        let record: APIKeyRecord
        let readAt: Date
    }

    private let lifetime: TimeInterval
    private let capacity: Int
    private let entries = Mutex<[String: Entry]>([:])

    init(lifetime: TimeInterval = 1, capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The key's record, from the cache when read less than `lifetime` before `now`, else from `read`.
    func record(
        id: String, now: Date, read: (String) throws(StorageError) -> APIKeyRecord?
    ) throws(StorageError) -> APIKeyRecord? {
        if let entry = entries.withLock({ $0[id] }), now >= entry.readAt, now.timeIntervalSince(entry.readAt) < lifetime
        {
            return entry.record
        }
        guard let record = try read(id) else {
            forget(id)
            return nil
        }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[id] = Entry(record: record, readAt: now)
        }
        return record
    }

    /// Drops the key, so that its next use reads the store (after a revocation).
    func forget(_ id: String) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }
}
