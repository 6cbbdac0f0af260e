import Foundation
import Testing

@testable import Telemetry

@Suite("RFC 3339 times")
struct RFC3339TimeTests {
    private let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Whole seconds read as Foundation's formatter writes them, over leap years, month ends and
    /// centuries; the milliseconds (which the store keeps exactly) are written exactly.
    @Test func matchesFoundationAndKeepsMilliseconds() {
        var generator = SystemRandomNumberGenerator()
        var seconds: [Int64] = [0, 951_782_400, 951_868_799, 4_107_542_399, 1_800_000_000, 86_399, 4_102_444_800]
        for _ in 0..<20_000 { seconds.append(Int64.random(in: 0..<7_258_118_400, using: &generator)) }
        for second in seconds {
            let whole = Date(timeIntervalSince1970: Double(second))
            #expect(RFC3339Time.format(whole) == foundation.format(whole), "\(second)")
            let milliseconds = Int64.random(in: 0..<1000, using: &generator)
            let exact = Date(timeIntervalSince1970: Double(second * 1000 + milliseconds) / 1000)
            let text = RFC3339Time.format(exact)
            #expect(text.dropLast(5) == foundation.format(whole).dropLast(5))
            #expect(text.suffix(4) == String(format: "%03dZ", milliseconds), "\(second).\(milliseconds)")
        }
        // Times before 1970 (a clock set wrong) are written too.
        #expect(RFC3339Time.format(Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
    }
}
