internal import CLibPQ
package import Storage

#if canImport(Glibc)
    internal import Glibc
#endif

/// One libpq connection; the only place that holds a `PGconn*`.
///
/// Statements are prepared once per connection under a name of their own (`query` keeps the names),
/// parameters go as text (bytes as binary), and results come back as `PostgresRows`: Swift values
/// read by column name, with no pointer into libpq left behind. Errors are `StorageError`, their
/// code mapped from the SQLSTATE (`PostgresError`).
///
/// Not `Sendable`: a libpq connection serves one thread at a time; its owner (a pool) hands it out.
package final class PostgresConnection {
    private let handle: OpaquePointer
    private var statementNames: [String: String] = [:]
    /// The store's `?` statements in PostgreSQL's `$n` spelling (see `cached`).
    private var numberedSQL: [String: String] = [:]
    /// Rows the last statement run by `query` changed (`SQLSession.changes`); a statement sent
    /// without waiting has its count checked by its `ExpectedChanges` instead.
    package private(set) var changes = 0
    /// Statements sent in pipeline mode whose results are not read yet (`sendWithoutWaiting`).
    /// Those that `answers` give the rows a wait returns; the others (`BEGIN`, `SET`) only their failure.
    private var unread: [(sql: String, expected: ExpectedChanges?, answers: Bool)] = []
    /// Times this connection waited for the server's answers: the first wait of a transaction that
    /// finds the connection lost wrote nothing (`PostgresStore` then runs the work on another).
    package private(set) var roundTrips = 0
    /// Statements run or sent that may change rows (all but `SELECT`s): a transaction whose work
    /// threw before any of them has nothing to undo.
    package private(set) var writes = 0
    /// The prepared statements that only read.
    private var readingStatements: Set<String> = []
    /// The store's reads ahead for a batch of writes on this connection (`PostgresWriteBatcher`).
    package let lockedOrders = LockedOrderReads()

    private init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        PQfinish(handle)
    }

    /// Connects to `url` (libpq's URL or key/value syntax; several hosts allowed).
    /// - Parameters:
    ///   - connectTimeout: seconds to wait for each host before the next (or the error).
    ///   - statementTimeout: milliseconds a statement may run before the server cancels it (0: no limit).
    /// - Throws: `StorageError` `unavailable` when no server answers or the login is refused.
    package static func connect(url: String, connectTimeout: Int = 5, statementTimeout: Int = 0)
        throws(StorageError) -> PostgresConnection
    {
        let keywords = ["dbname", "connect_timeout", "application_name"]
        let values = [url, String(max(1, connectTimeout)), "deliveryd"]
        let handle = withCArray(keywords.map { Array($0.utf8CString) } + [nil]) { keywordPointers in
            withCArray(values.map { Array($0.utf8CString) } + [nil]) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let handle else { throw StorageError(.unavailable, "libpq could not allocate a connection") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(handle)).trimmingTrailingNewlines
            PQfinish(handle)
            throw StorageError(.unavailable, "cannot connect to PostgreSQL: \(message)")
        }
        clibpq_quiet_notices(handle)
        let connection = PostgresConnection(handle: handle)
        // Prepared statements keep one plan, made without their values (but see
        // `queryPlannedForValues`). Left to itself, the server plans a statement again at every
        // call for as long as the average cost of its plans since the connection opened stays below
        // that one plan's, and plans made while a table was nearly empty keep that average low for
        // tens of thousands of calls (a status change's read planned at each of 24,500 calls:
        // planning four times its running time).
        try connection.execute("SET statement_timeout = \(max(0, statementTimeout)); \(planningOnce)")
        return connection
    }

    /// Whether the connection is still up as far as libpq knows (it learns of a loss on the next call).
    package var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Whether the open transaction failed (a statement of it failed): only a rollback ends it.
    package var transactionFailed: Bool { PQtransactionStatus(handle) == PQTRANS_INERROR }

    /// The server's version number (`150018` for 15.18).
    package var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// Runs SQL without parameters, several statements allowed (migrations, `SET`, `ROLLBACK`), after
    /// reading what was sent before it.
    package func execute(_ sql: String) throws(StorageError) {
        try readUnread()
        roundTrips += 1
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql: sql)
    }

    /// Waits up to `timeout` seconds for notifications of the channels this connection `LISTEN`s to.
    /// - Returns: the notifications' channels (empty after the timeout).
    /// - Throws: `StorageError` `unavailable` when the connection is lost.
    package func notifications(waitingUpTo timeout: Double) throws(StorageError) -> [String] {
        var pending = drainNotifications()
        guard pending.isEmpty else { return pending }
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw StorageError(.unavailable, "the PostgreSQL connection is closed") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout * 1000))
        if ready > 0 {
            guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
                let detail = String(cString: PQerrorMessage(handle)).trimmingTrailingNewlines
                throw StorageError(.unavailable, "the PostgreSQL connection was lost: \(detail)")
            }
            pending = drainNotifications()
        }
        return pending
    }

    private func drainNotifications() -> [String] {
        var channels: [String] = []
        while let notification = PQnotifies(handle) {
            channels.append(String(cString: notification.pointee.relname))
            PQfreemem(notification)
        }
        return channels
    }

    /// Runs one statement with `parameters` (`$1`, `$2`, …), prepared on this connection the first
    /// time under a name of its own. Statements sent before it go out with it, and their results are
    /// read with its own (one round trip).
    @discardableResult
    package func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws(StorageError) -> PostgresRows {
        let name = try preparedName(for: sql)
        if !readingStatements.contains(name) { writes += 1 }
        guard unread.isEmpty else {
            try sendPrepared(name, sql: sql, parameters, expected: nil)
            guard let rows = try readUnread() else {
                throw StorageError("PostgreSQL sent no result [\(sql.prefix(200))]")
            }
            changes = rows.affected
            return rows
        }
        roundTrips += 1
        let result = withParameters(parameters) { count, values, lengths, formats in
            PQexecPrepared(handle, name, count, values, lengths, formats, 0)
        }
        defer { PQclear(result) }
        try check(result, sql: sql)
        let rows = PostgresRows(result!, query: sql)
        changes = rows.affected
        return rows
    }

    /// Runs one statement planned for its `parameters` at this call, not prepared: for a statement
    /// whose best plan depends on its values (a time range, which on a large table may select a
    /// few rows or most of them), where one plan for every value could scan a whole table.
    @discardableResult
    package func queryPlannedForValues(_ sql: String, _ parameters: [DatabaseValue]) throws(StorageError)
        -> PostgresRows
    {
        if !sql.isReadOnlyStatement { writes += 1 }
        try enterPipeline()
        // The connection's setting forces one plan on every statement, this one too: it is lifted
        // around it, in the same round trip. Should the statement fail, its transaction's rollback
        // (or the implicit one of the round trip) takes the lifting back with it.
        try sendUnprepared(Self.planningForValues)
        let sent = withParameters(parameters) { count, values, lengths, formats in
            PQsendQueryParams(handle, sql, count, nil, values, lengths, formats, 0)
        }
        guard sent == 1 else { throw sendFailure(sql) }
        unread.append((sql, nil, true))
        try sendUnprepared(Self.planningOnce)
        guard let rows = try readUnread() else { throw StorageError("PostgreSQL sent no result [\(sql.prefix(200))]") }
        changes = rows.affected
        return rows
    }

    /// Sends a statement in pipeline mode without waiting for its result, which is read with the next
    /// statement's that waits (`query`, `commit`, `execute`); `expected` is checked then. The first
    /// failure among them is thrown there, and the statements after it are not run.
    package func sendWithoutWaiting(_ sql: String, _ parameters: [DatabaseValue], expected: ExpectedChanges?)
        throws(StorageError)
    {
        try sendPrepared(try preparedName(for: sql), sql: sql, parameters, expected: expected)
    }

    /// Starts a transaction without waiting: `BEGIN` goes out with the transaction's first statement.
    package func begin(_ sql: String) throws(StorageError) {
        try enterPipeline()
        try sendUnprepared(sql)
    }

    /// Sends a statement without parameters, whose rows no one reads, in pipeline mode (the caller
    /// entered it).
    private func sendUnprepared(_ sql: String) throws(StorageError) {
        guard PQsendQueryParams(handle, sql, 0, nil, nil, nil, nil, 0) == 1 else { throw sendFailure(sql) }
        unread.append((sql, nil, false))
    }

    private static let planningOnce = "SET plan_cache_mode = force_generic_plan"
    private static let planningForValues = "SET plan_cache_mode = auto"

    /// Commits, reading the results of everything sent before in the same round trip.
    package func commit() throws(StorageError) {
        guard !unread.isEmpty else { return try execute("COMMIT") }
        guard PQsendQueryParams(handle, "COMMIT", 0, nil, nil, nil, nil, 0) == 1 else {
            throw sendFailure("COMMIT")
        }
        unread.append(("COMMIT", nil, false))
        try readUnread()
    }

    /// Rolls back, whatever was sent before and whether it failed.
    package func rollback() throws(StorageError) {
        _ = try? readUnread()
        try execute("ROLLBACK")
    }

    private func sendPrepared(_ name: String, sql: String, _ parameters: [DatabaseValue], expected: ExpectedChanges?)
        throws(StorageError)
    {
        try enterPipeline()
        if !readingStatements.contains(name) { writes += 1 }
        let sent = withParameters(parameters) { count, values, lengths, formats in
            PQsendQueryPrepared(handle, name, count, values, lengths, formats, 0)
        }
        guard sent == 1 else { throw sendFailure(sql) }
        unread.append((sql, expected, true))
    }

    private func enterPipeline() throws(StorageError) {
        guard PQpipelineStatus(handle) == PQ_PIPELINE_OFF else { return }
        guard PQenterPipelineMode(handle) == 1 else { throw sendFailure("entering pipeline mode") }
    }

    /// Marks the end of what was sent, reads each statement's result in order, and leaves pipeline
    /// mode. - Returns: the rows of the last statement that answers (`nil` when none was sent).
    @discardableResult
    private func readUnread() throws(StorageError) -> PostgresRows? {
        guard !unread.isEmpty else { return nil }
        let statements = unread
        unread = []
        roundTrips += 1
        guard PQpipelineSync(handle) == 1 else { throw sendFailure(statements[0].sql) }
        var failure: StorageError?
        var last: PostgresRows?
        for statement in statements {
            // A statement's results end with a null; one that failed, or follows a failure, has one result.
            while let result = PQgetResult(handle) {
                defer { PQclear(result) }
                guard failure == nil, PQresultStatus(result) != PGRES_PIPELINE_ABORTED else { continue }
                do {
                    try check(result, sql: statement.sql)
                    let rows = PostgresRows(result, query: statement.sql)
                    if let expected = statement.expected, rows.affected != expected.rows { failure = expected.error }
                    if statement.answers { last = rows }
                } catch {
                    failure = error
                }
            }
            if PQstatus(handle) != CONNECTION_OK { break }
        }
        if PQstatus(handle) == CONNECTION_OK, let sync = PQgetResult(handle) {
            PQclear(sync)
            PQexitPipelineMode(handle)
        } else {
            statementNames = [:]
            failure = failure ?? StorageError(.unavailable, "the PostgreSQL connection was lost: \(lastError)")
        }
        if let failure { throw failure }
        return last
    }

    private var lastError: String { String(cString: PQerrorMessage(handle)).trimmingTrailingNewlines }

    /// A statement libpq could not send: the connection is gone (or was never in a state to send).
    private func sendFailure(_ sql: String) -> StorageError {
        if PQstatus(handle) != CONNECTION_OK {
            statementNames = [:]
            return StorageError(.unavailable, "the PostgreSQL connection was lost: \(lastError)")
        }
        return StorageError("could not send to PostgreSQL: \(lastError) [\(sql.prefix(200))]")
    }

    /// Calls `body` with `parameters` as libpq takes them: count, C strings, lengths, formats.
    private func withParameters<T>(
        _ parameters: [DatabaseValue],
        _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> T
    ) -> T {
        var values: [[CChar]?] = []
        var formats: [Int32] = []
        values.reserveCapacity(parameters.count)
        formats.reserveCapacity(parameters.count)
        for parameter in parameters {
            let (bytes, binary) = Self.encode(parameter)
            values.append(bytes?.map { CChar(bitPattern: $0) })
            formats.append(binary ? 1 : 0)
        }
        let lengths = values.map { Int32($0?.count ?? 0) }
        return withCArray(values) { pointers in body(Int32(parameters.count), pointers, lengths, formats) }
    }

    /// `sql`, written with `?` parameters as SQLite takes them, numbered `$1`, `$2`, … once per text.
    package func numbered(_ sql: String) -> String {
        if let numbered = numberedSQL[sql] { return numbered }
        let numbered = PlaceholderNumbering.numbered(sql)
        numberedSQL[sql] = numbered
        return numbered
    }

    private func preparedName(for sql: String) throws(StorageError) -> String {
        if let name = statementNames[sql] { return name }
        try readUnread()  // a statement is prepared outside pipeline mode
        let name = "deliveryd_\(statementNames.count + 1)"
        let result = PQprepare(handle, name, sql, 0, nil)
        defer { PQclear(result) }
        try check(result, sql: sql)
        statementNames[sql] = name
        if sql.isReadOnlyStatement { readingStatements.insert(name) }
        return name
    }

    /// A failed result as the `StorageError` its SQLSTATE stands for; a lost connection is `unavailable`.
    private func check(_ result: OpaquePointer?, sql: String) throws(StorageError) {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        guard status != PGRES_COMMAND_OK, status != PGRES_TUPLES_OK else { return }
        let sqlState = result.flatMap { clibpq_sqlstate($0) }.map { String(cString: $0) }
        let message = result.map { String(cString: PQresultErrorMessage($0)) } ?? ""
        let detail = (message.isEmpty ? String(cString: PQerrorMessage(handle)) : message).trimmingTrailingNewlines
        if PQstatus(handle) != CONNECTION_OK {
            // The server went away mid-call: whatever the result says, nothing can be assumed stored.
            statementNames = [:]
            throw StorageError(.unavailable, "the PostgreSQL connection was lost: \(detail)", underlying: sqlState)
        }
        throw PostgresError.storageError(sqlState: sqlState, message: "\(detail) [\(sql.prefix(200))]")
    }

    /// Text for numbers and text, binary for bytes (so that they need no escaping).
    private static func encode(_ value: DatabaseValue) -> (bytes: [UInt8]?, binary: Bool) {
        switch value {
        case .null: (nil, false)
        case .integer(let number): (Array(String(number).utf8) + [0], false)
        case .real(let number): (Array("\(number)".utf8) + [0], false)
        case .text(let text): (Array(text.utf8) + [0], false)
        case .blob(let bytes): (bytes, true)
        }
    }
}

@available(*, unavailable, message: "a libpq connection serves one thread at a time; a pool hands it out")
extension PostgresConnection: Sendable {}

/// Calls `body` with C copies of `values` (`nil` stays a null pointer), freed after the call.
private func withCArray<T>(_ values: [[CChar]?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    let copies: [UnsafeMutablePointer<CChar>?] = values.map { value in
        guard let value else { return nil }
        // An empty value still gets a pointer: only `nil` means NULL.
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, value.count))
        copy.initialize(from: value, count: value.count)
        return copy
    }
    defer { for copy in copies { copy?.deallocate() } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}

extension String {
    /// Whether the statement only reads (a `SELECT`).
    fileprivate var isReadOnlyStatement: Bool { drop(while: \.isWhitespace).prefix(6).uppercased() == "SELECT" }

    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }
}
