import Foundation
import PostgresStorage
import Storage
import TestSupport
import Testing

@Suite("PostgreSQL store: what several nodes share")
struct PostgresStoreTests {
    /// A periodic task runs on one node at a time: while one store runs it, another store on the same
    /// database skips it; once it is done (or failed) another takes it; another task is not held up.
    @Test func aTaskRunsOnOneNodeAtATime() throws {
        let place = NSTemporaryDirectory() + "exclusive-" + UUID().uuidString
        let (first, second) = (try TestStore.postgres(place), try TestStore.postgres(place))
        let inside = try first.exclusively("retention") {
            try second.exclusively("retention") { "ran twice" } ?? "skipped"
        }
        #expect(inside == "skipped")
        #expect(try second.exclusively("retention") { "ran" } == "ran", "released once done")
        #expect(try first.exclusively("retention") { try second.exclusively("stalled starts") { 1 } } == 1)
        struct Failure: Error {}
        #expect(throws: Failure.self) { try first.exclusively("retention") { throw Failure() } }
        #expect(try second.exclusively("retention") { "ran" } == "ran", "released after a failure")
    }
}
