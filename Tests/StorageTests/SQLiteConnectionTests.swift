import CSQLite
import DeliveryActivityContract
import Foundation
import OrderDomain
import Testing

@testable import Storage

@Suite("SQLite wrapper")
struct SQLiteConnectionTests {
    /// SQLite keeps no memory statistics in deliveryd's process: with them, every allocation of
    /// every connection takes one process-wide mutex, and the writer and the readers queue on it.
    @Test func sqliteKeepsNoMemoryStatistics() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try connection.execute("CREATE TABLE note (body TEXT); INSERT INTO note VALUES (hex(randomblob(4000)))")
        #expect(try connection.cached("SELECT length(body) AS n FROM note").firstRow([]) { try $0.int("n") } == 8000)
        #expect(sqlite3_memory_used() == 0, "statistics kept: sqlite3_config ran after SQLite initialized")
    }

    /// A file opened with deliveryd's pragmas is in WAL mode, and a committed row is read back after the
    /// connection is closed and the file reopened.
    @Test func walRoundTripSurvivesReopen() throws {
        let directory = try TemporaryDirectory()
        let configuration = StorageConfiguration(dataDirectory: directory.path)
        do {
            let connection = try SQLiteConnection.open(configuration)
            #expect(try connection.journalMode() == "wal")
            try connection.execute(
                "CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT NOT NULL, weight REAL, raw BLOB)")
            try connection.transaction {
                try connection.cached("INSERT INTO note (body, weight, raw) VALUES (?, ?, ?)")
                    .run([.text("héllo, wörld ✓"), .real(2.5), .blob([0, 1, 254, 255])])
            }
            #expect(connection.changes == 1)
        }
        #expect(FileManager.default.fileExists(atPath: configuration.databasePath))

        let reopened = try SQLiteConnection.open(configuration)
        let rows = try reopened.cached("SELECT id, body, weight, raw FROM note").rows { row in
            [try row["id"], try row["body"], try row["weight"], try row["raw"]]
        }
        #expect(rows == [[.integer(1), .text("héllo, wörld ✓"), .real(2.5), .blob([0, 1, 254, 255])]])
        #expect(try reopened.journalMode() == "wal")
    }

    /// A transaction whose body throws leaves nothing behind.
    @Test func failedTransactionRollsBack() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try connection.execute("CREATE TABLE item (name TEXT NOT NULL UNIQUE)")
        try connection.cached("INSERT INTO item VALUES (?)").run([.text("a")])
        #expect(throws: SQLiteError.self) {
            try connection.transaction {
                try connection.cached("INSERT INTO item VALUES (?)").run([.text("b")])
                try connection.cached("INSERT INTO item VALUES (?)").run([.text("a")])
            }
        }
        #expect(connection.isAutocommit)
        let names = try connection.cached("SELECT name FROM item ORDER BY name").rows { try $0.text("name") }
        #expect(names == ["a"])
    }

    /// A column reads the same whatever order a decoder asks for the columns in, and a name the
    /// query repeats reads its last column, row after row of one cached statement.
    @Test func columnsReadByNameInAnyOrder() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try connection.execute("CREATE TABLE pair (a TEXT, b TEXT, longer_column_name INTEGER)")
        for index in 0..<3 {
            try connection.cached("INSERT INTO pair VALUES (?, ?, ?)")
                .run([.text("a\(index)"), .text("b\(index)"), .integer(Int64(index))])
        }
        let sql = "SELECT a, b, longer_column_name, b AS a FROM pair ORDER BY longer_column_name"
        for _ in 0..<2 {
            let inOrder = try connection.cached(sql).rows { row in
                [try row.text("a"), try row.text("b"), String(try row.int("longer_column_name"))]
            }
            let shuffled = try connection.cached(sql).rows { row in
                [try row.text("b"), String(try row.int("longer_column_name")), try row.text("a"), try row.text("b")]
            }
            #expect(inOrder == [["b0", "b0", "0"], ["b1", "b1", "1"], ["b2", "b2", "2"]])
            #expect(shuffled == [["b0", "0", "b0", "b0"], ["b1", "1", "b1", "b1"], ["b2", "2", "b2", "b2"]])
        }
    }

    /// Rows are read by column name: a column the query lacks, a NULL where a value is required, a
    /// value of another type and an unknown raw value are thrown, never read as an empty value.
    @Test func rowsAreReadByNameAndRefuseWhatTheyDoNotHold() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try connection.execute("CREATE TABLE item (name TEXT, count INTEGER, status TEXT)")
        try connection.cached("INSERT INTO item VALUES (?, ?, ?)").run([.text("a"), .null, .text("delivered")])
        let query = try connection.cached("SELECT name, count AS total, status FROM item")
        #expect(try query.firstRow { try $0.text("name") } == "a")
        #expect(try query.firstRow { try $0.value("status", as: OrderStatus.self) } == .delivered)
        #expect(try query.firstRow { try $0.optionalInt("total") } == .some(nil))
        #expect(throws: StorageError.self) { try query.firstRow { try $0.int("total") } }
        #expect(throws: StorageError.self) { try query.firstRow { try $0.int("count") } }
        #expect(throws: StorageError.self) { try query.firstRow { try $0.int("name") } }
        #expect(throws: StorageError.self) { try query.firstRow { try $0.value("name", as: OrderStatus.self) } }
    }

    /// Constraint violations surface as `SQLiteError` with SQLite's code and message.
    @Test func errorsCarrySQLiteCode() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
        try connection.execute("CREATE TABLE item (name TEXT NOT NULL)")
        do {
            try connection.cached("INSERT INTO item VALUES (?)").run([.null])
            Issue.record("a NULL went into a NOT NULL column")
        } catch {
            #expect(error.code == .constraint)
            #expect(error.message.contains("NOT NULL"))
        }
        #expect(throws: SQLiteError.self) { try connection.execute("SELEKT 1") }
    }

    /// The public `Database` creates its data directory and reports WAL.
    @Test func databaseCreatesDirectory() throws {
        let directory = try TemporaryDirectory()
        let nested = directory.path + "/a/b"
        let database = try Database.open(StorageConfiguration(dataDirectory: nested))
        #expect(database.journalMode == "wal")
        #expect(FileManager.default.fileExists(atPath: nested + "/deliveryd.sqlite3"))
    }
}
