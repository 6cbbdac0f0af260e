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

    /// A held key is reread by the refresh, so that a lookup without the store finds it past its
    /// lifetime; a key gone from the store is dropped, and one unused for a minute is let go.
    @Test func heldKeysAreRereadOffTheRequestPath() throws {
        let cache = APIKeyCache(lifetime: 1)
        let reads = Reads()
        var stored: APIKeyRecord? = record
        let read: (String) throws(StorageError) -> APIKeyRecord? = { _ in
            reads.count += 1
            return stored
        }
        #expect(cache.cachedRecord(id: "k1", now: start) == nil)
        _ = try cache.record(id: "k1", now: start, read: read)
        cache.hold("k1", now: start)
        cache.refreshHeld(now: start.addingTimeInterval(0.5), read: read)
        cache.refreshHeld(now: start.addingTimeInterval(1.0), read: read)
        #expect(reads.count == 3)
        #expect(cache.cachedRecord(id: "k1", now: start.addingTimeInterval(1.4))?.id == "k1")
        stored = nil
        cache.refreshHeld(now: start.addingTimeInterval(1.5), read: read)
        #expect(cache.cachedRecord(id: "k1", now: start.addingTimeInterval(1.5)) == nil)
        stored = record
        cache.refreshHeld(now: start.addingTimeInterval(61), read: read)
        #expect(reads.count == 4, "a minute after its last use the key is no longer reread")
        #expect(cache.cachedRecord(id: "k1", now: start.addingTimeInterval(61)) == nil)
    }

    /// No more than `heldCapacity` keys are held: guessing ids cannot make the refresh read more.
    @Test func heldKeysAreBounded() throws {
        let cache = APIKeyCache(lifetime: 1)
        let reads = Reads()
        let read: (String) throws(StorageError) -> APIKeyRecord? = { [record] _ in
            reads.count += 1
            return record
        }
        for index in 0..<(APIKeyCache.heldCapacity + 10) { cache.hold("k\(index)", now: start) }
        cache.refreshHeld(now: start, read: read)
        #expect(reads.count == APIKeyCache.heldCapacity)
    }
}
