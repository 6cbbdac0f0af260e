internal import Synchronization

/// Answered requests by method, route and status, with a duration histogram per method and route.
///
/// Each event loop counts into its own table (a lock only the loop and a reader ever take, so it is
/// never contended on the request path); `HTTPServer.requestStatistics()` merges them. Routes are
/// the router's patterns, so the label sets stay as few as the routes.
public struct RequestStatistics: Sendable {
    public struct Key: Hashable, Sendable {
        public let method: String
        /// The route pattern; `nil` when no route matched.
        public let route: String?
        public let status: Int
    }

    public struct RouteKey: Hashable, Sendable {
        public let method: String
        public let route: String?
    }

    public struct Durations: Sendable {
        /// Cumulative counts per bound of `RequestStatistics.durationBuckets`.
        public var bucketCounts: [UInt64]
        public var sum: Double
        public var count: UInt64
    }

    /// Upper bounds of the duration histogram, in seconds.
    public static let durationBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5]
    /// The methods counted by name; any other is `other`.
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"]

    public var requests: [Key: UInt64] = [:]
    public var durations: [RouteKey: Durations] = [:]
}

/// One loop's tally, keyed by small integers so that counting a request hashes no string.
final class LoopStatistics: Sendable {
    private struct Key: Hashable {
        let method: Int
        let route: Int
        let status: Int
    }

    private struct RouteKey: Hashable {
        let method: Int
        let route: Int
    }

    private struct Tally {
        var requests: [Key: UInt64] = [:]
        var durations: [RouteKey: RequestStatistics.Durations] = [:]
    }

    private let tally = Mutex(Tally())

    static func methodIndex(_ method: String) -> Int {
        switch method {
        case "GET": 0
        case "HEAD": 1
        case "POST": 2
        case "PUT": 3
        case "PATCH": 4
        case "DELETE": 5
        case "OPTIONS": 6
        default: 7
        }
    }

    /// - Parameter route: the router's index of the route, `-1` when none matched.
    func record(method: Int, route: Int, status: Int, seconds: Double) {
        tally.withLock { tally in
            tally.requests[Key(method: method, route: route, status: status), default: 0] += 1
            let key = RouteKey(method: method, route: route)
            var durations =
                tally.durations[key]
                ?? RequestStatistics.Durations(
                    bucketCounts: Array(repeating: 0, count: RequestStatistics.durationBuckets.count), sum: 0, count: 0)
            for (index, bound) in RequestStatistics.durationBuckets.enumerated() where seconds <= bound {
                durations.bucketCounts[index] += 1
            }
            durations.sum += seconds
            durations.count += 1
            tally.durations[key] = durations
        }
    }

    /// Adds this loop's counts to `statistics`, naming routes by `patterns[index]`.
    func add(to statistics: inout RequestStatistics, patterns: [String]) {
        tally.withLock { tally in
            func pattern(_ index: Int) -> String? { index >= 0 && index < patterns.count ? patterns[index] : nil }
            for (key, count) in tally.requests {
                let named = RequestStatistics.Key(
                    method: RequestStatistics.methods[key.method], route: pattern(key.route), status: key.status)
                statistics.requests[named, default: 0] += count
            }
            for (key, durations) in tally.durations {
                let named = RequestStatistics.RouteKey(
                    method: RequestStatistics.methods[key.method], route: pattern(key.route))
                if var merged = statistics.durations[named] {
                    for index in merged.bucketCounts.indices {
                        merged.bucketCounts[index] += durations.bucketCounts[index]
                    }
                    merged.sum += durations.sum
                    merged.count += durations.count
                    statistics.durations[named] = merged
                } else {
                    statistics.durations[named] = durations
                }
            }
        }
    }
}
