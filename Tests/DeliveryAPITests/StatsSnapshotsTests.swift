import Testing

@testable import DeliveryAPI

@Suite("Dashboard snapshots")
struct StatsSnapshotsTests {
    /// Counts builds and makes each one's bytes different.
    final class Builder {
        var count = 0
        func build() -> [UInt8] {
            count += 1
            return Array("{\"build\":\(count)}".utf8)
        }
    }

    /// Without an age every answer is built on its request.
    @Test func withoutAnAgeEveryAnswerIsBuilt() {
        let snapshots = StatsSnapshots(maximumAge: .zero)
        let builder = Builder()
        #expect(snapshots.summary(build: builder.build) != snapshots.summary(build: builder.build))
        #expect(builder.count == 2)
        snapshots.refresh(summary: builder.build, history: builder.build)
        #expect(builder.count == 2)
    }

    /// Within its age a snapshot answers; the refresh rebuilds only what was asked for, and the
    /// next request gets the rebuilt one.
    @Test func aSnapshotAnswersAndTheRefreshRebuildsWhatWasAsked() {
        let snapshots = StatsSnapshots(maximumAge: .seconds(600))
        let summaries = Builder()
        let histories = Builder()
        let first = snapshots.summary(build: summaries.build)
        #expect(snapshots.summary(build: summaries.build) == first)
        #expect(summaries.count == 1)
        snapshots.refresh(summary: summaries.build, history: histories.build)
        #expect(summaries.count == 2)
        #expect(histories.count == 0, "nobody asked for the history")
        #expect(snapshots.summary(build: summaries.build) == Array("{\"build\":2}".utf8))
        _ = snapshots.history(build: histories.build)
        snapshots.refresh(summary: summaries.build, history: histories.build)
        #expect(histories.count == 2)
    }
}
