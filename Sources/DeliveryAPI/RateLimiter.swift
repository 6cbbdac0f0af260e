import FoundationEssentials
import Synchronization

/// A limit of events per key: a bucket of `burst` tokens that refills at `perSecond`.
public struct RateLimit: Sendable, Hashable {
    public var burst: Double
    public var perSecond: Double

    public init(burst: Double, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }
}

/// The limits of the API, each with its default.
public struct RateLimits: Sendable, Hashable {
    /// Failed authentications per client address: 20, then one every 3 s.
    public var failedAuthenticationsPerAddress = RateLimit(burst: 20, perSecond: 1.0 / 3)
    /// Failed authentications naming one API key id: 10, then one every 6 s. Only failures count
    /// and the right key always gets in, so an attacker cannot lock the key's owner out.
    public var failedAuthenticationsPerKey = RateLimit(burst: 10, perSecond: 1.0 / 6)
    /// Requests per merchant or admin API key: what one tenant's backend may take of the machine.
    /// 100 a second, bursts of 200: one node serves 1,200 to 4,000 status changes a second (the
    /// end-to-end benchmark), so a merchant at its full rate takes at most a twelfth of it and cannot
    /// starve the others; 100 a second is 360,000 changes an hour.
    public var requestsPerKey = RateLimit(burst: 200, perSecond: 100)
    /// Requests per credential of one app on one phone: a rider key, a customer credential, an
    /// order's tracking token. 5 a second, bursts of 20: an app polls every few seconds, a rider
    /// posts a position every few seconds and a few statuses per order.
    public var requestsPerApp = RateLimit(burst: 20, perSecond: 5)
    /// Activities an order may have live at once.
    public var activitiesPerOrder = 10
    /// Push-to-start devices one merchant's customer may have.
    public var devicesPerCustomer = 10
    /// Activity registrations (new tokens, rotations, replacements) per order: each queues a push,
    /// so a tracking-token holder rotating tokens could otherwise make APNs traffic without end.
    /// 30 at once, then 30 an hour (an app registers an activity once and rotates its token a few
    /// times in the activity's 8 hours).
    public var registrationsPerOrder = RateLimit(burst: 30, perSecond: 30.0 / 3600)

    public init() {}
}

/// Token buckets by key, in memory, for one limit.
///
/// Memory is bounded: past `maximumKeys` buckets in a shard, those that have refilled completely
/// (they hold nothing a fresh bucket would not) are dropped. A restart forgets every bucket, which
/// errs on the side of letting clients in. Keys spread over shards, each behind its own lock, so
/// that handler threads taking tokens for different credentials rarely wait for each other.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    let limit: RateLimit
    private let maximumKeys: Int
    private let shards: [Shard]

    /// One lock and the buckets behind it.
    private final class Shard: Sendable {
        let buckets = Mutex<[String: Bucket]>([:])
    }

    init(_ limit: RateLimit, maximumKeys: Int = 100_000, shards: Int = 16) {
        self.limit = limit
        self.maximumKeys = max(1, maximumKeys / shards)
        self.shards = (0..<shards).map { _ in Shard() }
    }

    private func shard(_ key: String) -> Shard {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
    }

    /// Takes a token; returns `nil` when there was one, else how long until the next one comes.
    func take(_ key: String, now: Date) -> TimeInterval? {
        shard(key).buckets.withLock { buckets in
            var bucket = buckets[key].map { refilled($0, now) } ?? Bucket(tokens: limit.burst, updated: now)
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return limit.perSecond > 0 ? (1 - bucket.tokens) / limit.perSecond : .infinity
            }
            bucket.tokens -= 1
            if buckets[key] == nil, buckets.count >= maximumKeys {
                buckets = buckets.filter { refilled($0.value, now).tokens < limit.burst }
            }
            buckets[key] = bucket
            return nil
        }
    }

    /// The bucket at `now`. Its time never goes back: handler threads read the clock before they
    /// queue for the lock, so a late thread may bring an older `now`; moving `updated` back to it
    /// would credit the same interval again to the next thread (one key got 24 % over its rate).
    private func refilled(_ bucket: Bucket, _ now: Date) -> Bucket {
        guard now > bucket.updated else { return bucket }
        let elapsed = now.timeIntervalSince(bucket.updated)
        return Bucket(tokens: min(limit.burst, bucket.tokens + elapsed * limit.perSecond), updated: now)
    }
}
