import Foundation
import Synchronization
import Testing

@testable import DeliveryAPI

@Suite("Token buckets")
struct RateLimiterTests {
    /// A take that brings an older time (its thread read the clock before another's take) does not
    /// move the bucket back: the next take is not credited the same second again.
    @Test func anOlderTimeDoesNotRefillTwice() {
        let limiter = RateLimiter(RateLimit(burst: 1, perSecond: 1))
        let start = Date(timeIntervalSince1970: 1_000_000)
        #expect(limiter.take("k", now: start) == nil)
        #expect(limiter.take("k", now: start.addingTimeInterval(1)) == nil, "one second refilled one token")
        #expect(limiter.take("k", now: start) != nil, "a late thread's older time")
        #expect(limiter.take("k", now: start.addingTimeInterval(1)) != nil, "that second was spent already")
        #expect(limiter.take("k", now: start.addingTimeInterval(2)) == nil)
    }

    /// Eight threads take from one key as fast as they can, each with the clock read before it waits
    /// for the lock, as handlers do: no more are admitted than the burst and the rate over the time
    /// the run took (measured, so the verdict does not depend on the machine's speed).
    @Test func manyThreadsAdmitNoMoreThanTheRate() {
        let limit = RateLimit(burst: 200, perSecond: 2_000)
        let limiter = RateLimiter(limit)
        let admitted = Atomic<Int>(0)
        let started = Date()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20_000 {
                let now = Date()
                if limiter.take("one-key", now: now) == nil { admitted.wrappingAdd(1, ordering: .relaxed) }
            }
        }
        let elapsed = Date().timeIntervalSince(started)
        let allowed = limit.burst + limit.perSecond * elapsed
        #expect(Double(admitted.load(ordering: .relaxed)) <= allowed.rounded(.up))
    }
}
