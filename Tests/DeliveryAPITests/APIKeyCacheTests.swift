import Foundation
import Storage
import Testing

@testable import DeliveryAPI

@Suite("API key cache")
struct APIKeyCacheTests {
    /// Counts the store reads behind the cache.
    final class Reads {
        var count = 0
    }

    private let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let record = APIKeyRecord(
        id: "k1", keyHash: "hash", role: .merchant, merchantID: "m-1", riderID: nil,
        createdAt: Date(timeIntervalSince1970: 1_700_000_000))

    /// A key is read once per lifetime, again once it is older, and again after `forget`.
    @Test func aKeyIsReadOncePerLifetime() throws {
        let cache = APIKeyCache(lifetime: 1)
        let reads = Reads()
        let read: (String) throws(StorageError) -> APIKeyRecord? = { [record] _ in
            reads.count += 1
            return record
        }
        #expect(try cache.record(id: "k1", now: start, read: read)?.id == "k1")
        #expect(try cache.record(id: "k1", now: start.addingTimeInterval(0.9), read: read)?.id == "k1")
        #expect(reads.count == 1)
        _ = try cache.record(id: "k1", now: start.addingTimeInterval(1.0), read: read)
        #expect(reads.count == 2)
        cache.forget("k1")
        _ = try cache.record(id: "k1", now: start.addingTimeInterval(1.1), read: read)
        #expect(reads.count == 3)
        // A clock that went back does not make an entry live longer.
        _ = try cache.record(id: "k1", now: start, read: read)
        #expect(reads.count == 4)
    }

    /// Unknown ids are never kept: each is read, so a key created a moment later works at once.
    @Test func unknownKeysAreNotKept() throws {
        let cache = APIKeyCache(lifetime: 60)
        let reads = Reads()
        var stored: APIKeyRecord? = nil
        let read: (String) throws(StorageError) -> APIKeyRecord? = { _ in
            reads.count += 1
            return stored
        }
        #expect(try cache.record(id: "k1", now: start, read: read) == nil)
        stored = record
        #expect(try cache.record(id: "k1", now: start, read: read)?.id == "k1")
        #expect(reads.count == 2)
    }

    /// The cache holds at most its capacity (here in one shard; each of several holds its part).
    @Test func theCacheStaysWithinItsCapacity() throws {
        let cache = APIKeyCache(lifetime: 60, capacity: 2, shards: 1)
        let reads = Reads()
        let read: (String) throws(StorageError) -> APIKeyRecord? = { [record] _ in
            reads.count += 1
            return record
        }
        for id in ["a", "b", "c"] { _ = try cache.record(id: id, now: start, read: read) }
        _ = try cache.record(id: "a", now: start, read: read)
        #expect(reads.count == 4)
    }

    /// The key generation empties the cache the first time it is seen (a key read before may
    /// predate a change), when it moved, and when it cannot be read; not while it stays.
    @Test func aMovedKeyGenerationEmptiesTheCache() throws {
        let cache = APIKeyCache(lifetime: 300)
        let reads = Reads()
        let read: (String) throws(StorageError) -> APIKeyRecord? = { [record] _ in
            reads.count += 1
            return record
        }
        _ = try cache.record(id: "k1", now: start, read: read)
        #expect(cache.confirm { () throws(StorageError) in 5 }, "the first generation seen")
        #expect(cache.cachedRecord(id: "k1", now: start) == nil)
        _ = try cache.record(id: "k1", now: start, read: read)
        #expect(!cache.confirm { () throws(StorageError) in 5 })
        #expect(cache.cachedRecord(id: "k1", now: start.addingTimeInterval(299))?.id == "k1")
        #expect(cache.confirm { () throws(StorageError) in 6 }, "a key changed somewhere")
        #expect(cache.cachedRecord(id: "k1", now: start) == nil)
        _ = try cache.record(id: "k1", now: start, read: read)
        #expect(cache.confirm { () throws(StorageError) in throw StorageError("the database is gone") })
        #expect(cache.cachedRecord(id: "k1", now: start) == nil)
        #expect(cache.confirm { () throws(StorageError) in 6 }, "unseen while it could not be read")
        #expect(reads.count == 3)
    }

    /// A read that a change overtook is not kept: it may have seen the key before the change.
    @Test func aReadOvertakenByAChangeIsNotKept() throws {
        let cache = APIKeyCache(lifetime: 300)
        cache.confirm { () throws(StorageError) in 1 }
        let read: (String) throws(StorageError) -> APIKeyRecord? = { [record] _ in
            cache.confirm { () throws(StorageError) in 2 }  // revoked elsewhere while this read ran
            return record
        }
        #expect(try cache.record(id: "k1", now: start, read: read)?.id == "k1")
        #expect(cache.cachedRecord(id: "k1", now: start) == nil)
    }
}
