import Foundation
import Testing

@testable import Telemetry

@Suite("Metrics history")
struct MetricsHistoryTests {
    private struct Decoded: Decodable {
        struct Tier: Decodable {
            let name: String
            let stepSeconds: Double
            let capacity: Int
            let timesMs: [Int64]
            let series: [String: [Double]]
        }
        let gauges: [String]
        let tiers: [Tier]
    }

    private func decode(_ history: MetricsHistory, since: Date? = nil) throws -> Decoded {
        let milliseconds = since.map { Int64($0.timeIntervalSince1970 * 1000) }
        return try JSONDecoder().decode(Decoded.self, from: Data(history.json(sinceMilliseconds: milliseconds)))
    }

    private let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// A poll's newest samples are encoded as `json(sinceMilliseconds:)` would; more than the limit
    /// in either tier are not.
    @Test func recentSamplesWithinALimit() throws {
        let history = MetricsHistory(step: 10, fineCapacity: 10, coarseEvery: 2, coarseCapacity: 10, gauges: [])
        for index in 0..<6 {
            history.record([("pushes", Double(index))], at: start.addingTimeInterval(Double(index) * 10))
        }
        let since = Int64(start.addingTimeInterval(35).timeIntervalSince1970 * 1000)
        #expect(history.recentJSON(sinceMilliseconds: since, limit: 2) == history.json(sinceMilliseconds: since))
        #expect(history.recentJSON(sinceMilliseconds: since, limit: 1) == nil, "two fine samples are newer")
        #expect(history.recentJSON(sinceMilliseconds: 0, limit: 5) == nil)
    }

    /// The fine tier keeps the newest samples, the coarse tier every third of them, both bounded.
    @Test func tiersKeepTheNewestSamplesWithinTheirCapacity() throws {
        let history = MetricsHistory(step: 10, fineCapacity: 4, coarseEvery: 3, coarseCapacity: 2, gauges: ["depth"])
        for index in 0..<10 {
            history.record(
                [("pushes", Double(index * 5)), ("depth", Double(index % 2))],
                at: start.addingTimeInterval(Double(index) * 10))
        }
        let decoded = try decode(history)
        #expect(decoded.gauges == ["depth"])
        let fine = decoded.tiers[0]
        let coarse = decoded.tiers[1]
        #expect(fine.stepSeconds == 10 && coarse.stepSeconds == 30)
        #expect(fine.timesMs.map { ($0 - Int64(start.timeIntervalSince1970 * 1000)) / 10_000 } == [6, 7, 8, 9])
        #expect(fine.series["pushes"] == [30, 35, 40, 45])
        #expect(fine.series["depth"] == [0, 1, 0, 1])
        // Samples 0, 3, 6, 9 went to the coarse tier; it keeps the newest two.
        #expect(coarse.series["pushes"] == [30, 45])
        #expect(history.counts == (4, 2))
    }

    /// A figure first seen late reads 0 before; `since` gives only newer samples.
    @Test func lateColumnsAndIncrementalReads() throws {
        let history = MetricsHistory(step: 1, gauges: [])
        history.record([("a", 1)], at: start)
        history.record([("a", 2), ("failures.BadDeviceToken", 7)], at: start.addingTimeInterval(1))
        let whole = try decode(history)
        #expect(whole.tiers[0].series["failures.BadDeviceToken"] == [0, 7])
        let newer = try decode(history, since: start)
        #expect(newer.tiers[0].timesMs.count == 1 && newer.tiers[0].series["a"] == [2])
        #expect(try decode(history, since: start.addingTimeInterval(5)).tiers[0].timesMs.isEmpty)
        // Any time a client sends is answered: the far future has nothing, the far past everything.
        #expect(history.json(sinceMilliseconds: .max).count < history.json().count)
        #expect(history.json(sinceMilliseconds: .min) == history.json())
        // The whole history is encoded once per sample, and a new sample is seen at once.
        #expect(history.json() == history.json())
        history.record([("a", 3)], at: start.addingTimeInterval(2))
        #expect(try decode(history).tiers[0].series["a"] == [1, 2, 3])
    }

    /// Names are escaped, values that are not finite are kept as 0, and columns are bounded.
    @Test func namesEscapedAndColumnsBounded() throws {
        let history = MetricsHistory(step: 1, gauges: [])
        var values: [(name: String, value: Double)] = [("quote\"back\\slash\u{1}", .nan), ("fraction", 0.125)]
        values += (0..<100).map { ("column-\($0)", Double($0)) }
        history.record(values, at: start)
        let decoded = try decode(history)
        let series = decoded.tiers[0].series
        #expect(series.count == MetricsHistory.maximumColumns)
        #expect(series["quote\"back\\slash\u{1}"] == [0])
        #expect(series["fraction"] == [0.125])
    }
}
