import DeliveryActivityContract
import Foundation
import OrderDomain
import PostgresStorage
import Storage
import TestScheduling
import TestSupport
import Testing

/// The libpq wrapper against a real PostgreSQL server of the test's own.
@Suite("PostgreSQL connection", .serialized, .heavy)
struct PostgresConnectionTests {
    /// One server for the suite's tests: starting one takes a few seconds.
    static let server = Result { try PostgresServer() }

    static func connect(statementTimeout: Int = 0) throws -> PostgresConnection {
        try PostgresConnection.connect(url: try server.get().url, statementTimeout: statementTimeout)
    }

    /// Every kind of value goes in as a parameter and comes back as itself, read by column name;
    /// NULL, the extremes of a 64-bit integer, text beyond ASCII and every byte value included.
    @Test func valuesRoundTripByName() throws {
        let connection = try Self.connect()
        try connection.execute(
            "DROP TABLE IF EXISTS note; CREATE TABLE note (id bigint PRIMARY KEY, body text, weight double precision, raw bytea)"
        )
        let bytes = (0...255).map(UInt8.init)
        for (id, body, weight, raw) in [
            (Int64.max, DatabaseValue.text("héllo, wörld ✓ '\"\\"), DatabaseValue.real(2.5), DatabaseValue.blob(bytes)),
            (Int64.min, .null, .real(-0.125), .blob([])), (0, .text(""), .null, .null),
        ] {
            try connection.query(
                "INSERT INTO note (id, body, weight, raw) VALUES ($1, $2, $3, $4)", [.integer(id), body, weight, raw])
        }
        let rows = try connection.query("SELECT id, body, weight, raw FROM note ORDER BY id")
        #expect(rows.count == 3)
        #expect(try rows.map { try $0.int("id") } == [Int64.min, 0, Int64.max])
        #expect(try rows[2].text("body") == "héllo, wörld ✓ '\"\\")
        #expect(try rows[2].blob("raw") == bytes)
        #expect(try rows[0].optionalText("body") == nil)
        #expect(try rows[0].blob("raw") == [])
        #expect(try rows[0].double("weight") == -0.125)
        #expect(try rows[1].text("body") == "")
        #expect(throws: StorageError.self) { try rows[1].double("weight") }
        #expect(throws: StorageError.self) { try rows[0].text("missing") }
        let changed = try connection.query("UPDATE note SET weight = $1 WHERE id <> $2", [.real(1), .integer(0)])
        #expect(changed.affected == 2)
    }

    /// A status stored as text reads back as the domain's type; an unknown one is thrown.
    @Test func rawValuesAreChecked() throws {
        let connection = try Self.connect()
        let row = try #require(
            try connection.query(
                "SELECT $1::text AS status, $2::text AS other",
                [
                    .text("pickup"), .text("teleported"),
                ]
            ).first)
        #expect(try row.value("status", as: OrderStatus.self) == .pickup)
        #expect(throws: StorageError.self) { try row.value("other", as: OrderStatus.self) }
    }

    /// Errors carry their SQLSTATE, mapped to the codes the service tells apart.
    @Test func errorsAreMappedFromTheirSQLState() throws {
        let connection = try Self.connect(statementTimeout: 200)
        try connection.execute("DROP TABLE IF EXISTS item; CREATE TABLE item (name text PRIMARY KEY)")
        try connection.query("INSERT INTO item VALUES ($1)", [.text("a")])
        do {
            try connection.query("INSERT INTO item VALUES ($1)", [.text("a")])
            Issue.record("a duplicate key went in")
        } catch {
            #expect(error.code == .constraint)
            #expect(error.underlying == "SQLSTATE 23505")
        }
        do {
            try connection.execute("SELEKT 1")
            Issue.record("a syntax error ran")
        } catch {
            #expect(error.code == .failed && error.underlying == "SQLSTATE 42601")
        }
        do {
            try connection.query("SELECT pg_sleep(5)")
            Issue.record("the statement timeout did not cancel the statement")
        } catch {
            #expect(error.code == .busy && error.underlying == "SQLSTATE 57014", "\(error)")
        }
        // The connection goes on after each failure.
        #expect(try connection.query("SELECT count(*) AS items FROM item").first?.int("items") == 1)
    }

    /// Writes sent without waiting go out with the next statement that waits, in one round trip, and
    /// run in order; a transaction of BEGIN, sends and COMMIT waits once for its reads and once to commit.
    @Test func sentWritesGoOutWithTheNextRead() throws {
        let connection = try Self.connect()
        try connection.execute("DROP TABLE IF EXISTS tally; CREATE TABLE tally (name text PRIMARY KEY, n bigint)")
        func transaction() throws -> Int64? {
            try connection.begin("BEGIN")
            for name in ["a", "b", "c"] {
                try connection.sendWithoutWaiting(
                    "INSERT INTO tally (name, n) VALUES ($1, $2)", [.text(name), .integer(1)], expected: nil)
            }
            try connection.sendWithoutWaiting(
                "UPDATE tally SET n = n + 1 WHERE name <> $1", [.text("c")],
                expected: ExpectedChanges(rows: 2, else: StorageError("not two")))
            let total = try connection.query("SELECT sum(n)::bigint AS total FROM tally").first?.int("total")
            try connection.sendWithoutWaiting("DELETE FROM tally WHERE name = $1", [.text("a")], expected: nil)
            try connection.commit()
            return total
        }
        #expect(try transaction() == 5, "the sends ran, in order, before the read")
        #expect(try connection.query("SELECT name FROM tally ORDER BY name").map { try $0.text("name") } == ["b", "c"])
        try connection.execute("TRUNCATE tally")
        // Again, each statement prepared by now (preparing one waits for what was sent before it).
        let before = connection.roundTrips
        #expect(try transaction() == 5)
        #expect(connection.roundTrips - before == 2, "one wait for BEGIN, the sends and the read; one to commit")
    }

    /// A sent write that fails, or changes other rows than expected, is thrown at the next wait; the
    /// statements after it do not run, and after a rollback the connection serves the next transaction.
    @Test func aFailedSendFailsItsTransaction() throws {
        let connection = try Self.connect()
        try connection.execute("DROP TABLE IF EXISTS owned; CREATE TABLE owned (name text PRIMARY KEY)")
        try connection.query("INSERT INTO owned VALUES ($1)", [.text("taken")])

        try connection.begin("BEGIN")
        try connection.sendWithoutWaiting("INSERT INTO owned VALUES ($1)", [.text("new")], expected: nil)
        try connection.sendWithoutWaiting("INSERT INTO owned VALUES ($1)", [.text("taken")], expected: nil)
        try connection.sendWithoutWaiting("INSERT INTO owned VALUES ($1)", [.text("after")], expected: nil)
        #expect(throws: StorageError(.constraint, "")) { try connection.query("SELECT count(*) AS n FROM owned") }
        try connection.rollback()

        try connection.begin("BEGIN")
        try connection.sendWithoutWaiting(
            "UPDATE owned SET name = $1 WHERE name = $2", [.text("renamed"), .text("missing")],
            expected: ExpectedChanges(rows: 1, else: StorageError(.limitReached, "no such row")))
        #expect(throws: StorageError(.limitReached, "")) { try connection.commit() }
        try connection.rollback()

        let names = try connection.query("SELECT name FROM owned ORDER BY name").map { try $0.text("name") }
        #expect(names == ["taken"])
    }

    /// A prepared statement keeps one plan made without its values, however cheap the plans for
    /// its values were while its table was nearly empty: planned again at each call otherwise.
    @Test func preparedStatementsArePlannedOnce() throws {
        let connection = try Self.connect()
        try connection.execute(
            "DROP TABLE IF EXISTS parcel; CREATE TABLE parcel (id text PRIMARY KEY, owner text, at bigint)")
        let lookup = "SELECT id, at FROM parcel WHERE owner = $1 AND id = $2"
        for call in 0..<10 { try connection.query(lookup, [.text("o\(call)"), .text("p\(call)")]) }
        try connection.execute(
            """
            INSERT INTO parcel SELECT 'p' || n, 'o' || (n % 100), n FROM generate_series(1, 20000) AS n;
            ANALYZE parcel
            """)
        for call in 0..<10 {
            let rows = try connection.query(lookup, [.text("o\(call % 100)"), .text("p\(call + 100)")])
            #expect(rows.count == 1)
        }
        let plans = try #require(
            try connection.query(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", [.text(lookup)]
            ).first)
        #expect(try plans.int("custom_plans") == 0)
        #expect(try plans.int("generic_plans") == 20)
    }

    /// A statement planned for its values is planned at each call with them, and not kept
    /// prepared: a narrow time range over a large table reads its index, one that takes every row
    /// reads the table, which no single plan for any value does both.
    @Test func aStatementPlannedForItsValuesUsesThem() throws {
        let connection = try Self.connect()
        try connection.execute(
            """
            DROP TABLE IF EXISTS attempt; CREATE TABLE attempt (id bigint PRIMARY KEY, at bigint NOT NULL);
            INSERT INTO attempt SELECT n, (n * 7919) % 50000 FROM generate_series(1, 50000) AS n;
            CREATE INDEX attempt_by_time ON attempt (at); ANALYZE attempt
            """)
        let sweep = "SELECT count(*) AS selected FROM attempt WHERE at < $1"
        // This session's scans of the table not yet reported (the set-up's among them).
        func scans() throws -> (sequential: Int64, index: Int64) {
            let row = try #require(
                try connection.query(
                    "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'attempt'"
                ).first)
            return (try row.int("seq_scan"), try row.int("idx_scan"))
        }
        try connection.execute("BEGIN")
        let before = try scans()
        let narrow = try connection.queryPlannedForValues(sweep, [.integer(10)])
        let afterNarrow = try scans()
        let wide = try connection.queryPlannedForValues(sweep, [.integer(50_000)])
        let afterWide = try scans()
        try connection.execute("COMMIT")
        #expect(try narrow[0].int("selected") == 10)
        #expect(afterNarrow.sequential == before.sequential)
        #expect(afterNarrow.index > before.index)
        #expect(try wide[0].int("selected") == 50_000)
        #expect(afterWide.sequential == afterNarrow.sequential + 1)
        let kept = try connection.query(
            "SELECT count(*) AS kept FROM pg_prepared_statements WHERE statement = $1", [.text(sweep)])
        #expect(try kept[0].int("kept") == 0)
        let setting = try connection.query("SELECT current_setting('plan_cache_mode') AS mode")
        #expect(try setting[0].text("mode") == "force_generic_plan")
    }

    /// A statement planned for its values that fails leaves the connection planning once, in a
    /// transaction (after its rollback) and outside one.
    @Test func aFailedStatementPlannedForItsValuesLeavesOnePlan() throws {
        let connection = try Self.connect()
        let failing = "SELECT 1 / $1::int AS quotient"
        func mode() throws -> String {
            try connection.query("SELECT current_setting('plan_cache_mode') AS mode")[0].text("mode")
        }
        #expect(throws: StorageError.self) { try connection.queryPlannedForValues(failing, [.integer(0)]) }
        #expect(try mode() == "force_generic_plan")
        try connection.begin("BEGIN")
        #expect(throws: StorageError.self) { try connection.queryPlannedForValues(failing, [.integer(0)]) }
        try connection.rollback()
        #expect(try mode() == "force_generic_plan")
        #expect(try connection.queryPlannedForValues(failing, [.integer(4)])[0].int("quotient") == 0)
        #expect(try mode() == "force_generic_plan")
    }

    /// No server at the address: `unavailable`, within the connect timeout.
    @Test func noServerIsUnavailable() throws {
        let url = "postgresql://deliveryd:deliveryd@127.0.0.1:1/deliveryd"
        #expect(throws: StorageError(.unavailable, "")) {
            try PostgresConnection.connect(url: url, connectTimeout: 2)
        }
    }

    /// The mapping of SQLSTATE classes, including those a test cannot provoke cheaply.
    @Test(arguments: [
        ("23503", StorageError.Code.constraint), ("53100", .full), ("40001", .busy), ("40P01", .busy),
        ("55P03", .busy), ("08006", .unavailable), ("57P01", .unavailable), ("XX001", .corrupt), ("58030", .io),
        ("42P01", .failed),
    ])
    func sqlStatesMapToCodes(state: String, code: StorageError.Code) {
        #expect(PostgresError.code(sqlState: state) == code)
    }
}
