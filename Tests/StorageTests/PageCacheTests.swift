import CSQLite
import Foundation
import Storage
import Testing

/// The page cache wrapper (`CSQLitePageCache`): a commit after B-tree balancing no longer walks the
/// whole cache, and a truncation that has pages to drop still drops them.
@Suite("Page cache")
struct PageCacheTests {
    /// A connection to a fresh WAL database in a directory of its own, with a large cache.
    private static func open(_ place: StoreContractTests.Place) throws -> SQLiteConnection {
        var configuration = StorageConfiguration(dataDirectory: place.path)
        configuration.synchronous = .normal
        try FileManager.default.createDirectory(atPath: place.path, withIntermediateDirectories: true)
        let connection = try SQLiteConnection.open(configuration)
        try connection.execute(
            """
            CREATE TABLE rows (id INTEGER PRIMARY KEY, key TEXT NOT NULL, body TEXT NOT NULL);
            CREATE INDEX rows_by_key ON rows (key);
            """)
        return connection
    }

    private static func count(_ connection: SQLiteConnection) throws -> Int64 {
        try connection.cached("SELECT count(*) AS n FROM rows").firstRow([]) { try $0.int("n") } ?? -1
    }

    private static func integrity(_ connection: SQLiteConnection) throws -> String {
        try connection.cached("PRAGMA integrity_check").firstRow([]) { try $0.text("integrity_check") } ?? ""
    }

    /// Rows with random keys in many small transactions, after half of an earlier batch was deleted:
    /// the index splits in the middle and reuses freed pages out of order, which is what parks pages
    /// on the temporary key. Every commit's truncation is spared, none walks the cache.
    @Test func commitsAfterBalancingAreSpared() throws {
        let place = StoreContractTests.Place()
        let connection = try Self.open(place)
        var generator = SystemRandomNumberGenerator()
        func insert(_ count: Int, from first: Int) throws {
            for id in first..<(first + count) {
                try connection.cached("INSERT INTO rows (id, key, body) VALUES (?, ?, ?)").run([
                    .integer(Int64(id)), .text(String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)),
                    .text(String(repeating: "x", count: 300)),
                ])
            }
        }
        try connection.execute("BEGIN")
        try insert(20_000, from: 0)
        try connection.execute("COMMIT")
        try connection.execute("DELETE FROM rows WHERE id % 2 = 0")

        let before = SQLiteConnection.pageCacheTruncationsOnThisThread
        let commits = 400
        for batch in 0..<commits {
            try connection.execute("BEGIN IMMEDIATE")
            try insert(25, from: 100_000 + batch * 25)
            try connection.execute("COMMIT")
        }
        let after = SQLiteConnection.pageCacheTruncationsOnThisThread
        #expect(after.spared - before.spared >= commits)
        #expect(after.passed - before.passed == 0)
        #expect(try Self.count(connection) == 10_000 + Int64(commits * 25))
        #expect(try Self.integrity(connection) == "ok")
    }

    /// A transaction that grew the file and rolled back leaves pages past the end in the cache: that
    /// truncation goes through, and the rows written next read back whole.
    @Test func aRolledBackGrowthIsDropped() throws {
        let place = StoreContractTests.Place()
        let connection = try Self.open(place)
        let body = String(repeating: "y", count: 2_000)
        for round in 0..<5 {
            let before = SQLiteConnection.pageCacheTruncationsOnThisThread
            try connection.execute("BEGIN IMMEDIATE")
            for id in 0..<500 {
                try connection.cached("INSERT INTO rows (id, key, body) VALUES (?, ?, ?)").run([
                    .integer(Int64(1_000_000 + round * 1_000 + id)), .text("gone-\(id)"), .text(body),
                ])
            }
            try connection.execute("ROLLBACK")
            #expect(SQLiteConnection.pageCacheTruncationsOnThisThread.passed > before.passed, "round \(round)")

            try connection.execute("BEGIN IMMEDIATE")
            for id in 0..<100 {
                try connection.cached("INSERT INTO rows (id, key, body) VALUES (?, ?, ?)").run([
                    .integer(Int64(round * 100 + id)), .text("kept-\(round)-\(id)"), .text("z"),
                ])
            }
            try connection.execute("COMMIT")
        }
        #expect(try Self.count(connection) == 500)
        let gone = try connection.cached("SELECT count(*) AS n FROM rows WHERE key LIKE 'gone-%'").firstRow([]) {
            try $0.int("n")
        }
        #expect(gone == 0)
        #expect(try Self.integrity(connection) == "ok")
    }
}
