internal import CSQLite
internal import CSQLitePageCache

/// One open SQLite database connection; the only place that holds a `sqlite3*`.
///
/// - Important: A connection has exactly one owner at a time and is not `Sendable`: SQLite handles
///   must not be used from two threads at once. Share the database by giving each thread its own
///   connection (WAL lets readers run beside the one writer).
package final class SQLiteConnection: SQLSession {
    private let handle: OpaquePointer
    private var statementCache: [String: SQLiteStatement] = [:]
    package let path: String

    /// Opens (and creates, if asked) the database file at `path`.
    /// - Throws: `SQLiteError` with `cantOpen` and SQLite's message when the file cannot be opened.
    package init(path: String, readOnly: Bool = false, create: Bool = true) throws(SQLiteError) {
        _ = Self.libraryConfiguration
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        var pointer: OpaquePointer?
        let result = sqlite3_open_v2(path, &pointer, flags, nil)
        guard result == SQLITE_OK, let pointer else {
            let message = pointer.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(pointer)
            throw SQLiteError(extendedCode: result, message: message)
        }
        self.handle = pointer
        self.path = path
    }

    /// SQLite's process-wide settings, made once before the first connection opens (which
    /// initializes the library): no memory statistics (see `csqlite_disable_memory_statistics`),
    /// and the page cache wrapper of `CSQLitePageCache`. Either failing leaves SQLite's default,
    /// slower but as correct.
    private static let libraryConfiguration: Int32 = {
        let statistics = csqlite_disable_memory_statistics()
        let pageCache = csqlite_install_page_cache()
        return statistics != SQLITE_OK ? statistics : pageCache
    }()

    /// The page cache truncations this thread made since it started: passed on to SQLite's cache,
    /// or spared because no cached page could lie past the limit (see `CSQLitePageCache`).
    package static var pageCacheTruncationsOnThisThread: (passed: Int, spared: Int) {
        var passed = 0
        var spared = 0
        csqlite_page_cache_truncations(&passed, &spared)
        return (passed, spared)
    }

    deinit {
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows (pragmas, DDL, migrations).
    package func execute(_ sql: String) throws(SQLiteError) {
        let result = sqlite3_exec(handle, sql, nil, nil, nil)
        try check(result, sql: sql)
    }

    /// Runs one statement that returns no rows through the statement cache: for the statements every
    /// read and write transaction runs (`BEGIN`, `COMMIT`), which `execute` compiled each time
    /// (3 % of the CPU of positions alone).
    package func executeCached(_ sql: String) throws(SQLiteError) {
        try cached(sql).run([])
    }

    /// A prepared statement for `sql`, compiled once per connection and reused.
    ///
    /// The statement is reset and its bindings cleared before it is handed out again.
    package func cached(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let statement = statementCache[sql] {
            statement.reset()
            return statement
        }
        let statement = try SQLiteStatement(connection: self, sql: sql)
        statementCache[sql] = statement
        return statement
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back if it throws.
    ///
    /// `IMMEDIATE` takes the write lock up front, so a transaction never fails half-way with
    /// `SQLITE_BUSY` on its first write. The value is returned only after COMMIT succeeded.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try executeCached("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try executeCached("COMMIT")
            return value
        } catch {
            if !isAutocommit { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// True when no transaction is open.
    package var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    package var dialect: SQLDialect { .sqlite }

    /// Waits up to this many milliseconds for a lock held by another connection before `SQLITE_BUSY`.
    package func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Throws the connection's current error if `result` is not success.
    func check(_ result: Int32, sql: String? = nil) throws(SQLiteError) {
        guard result != SQLITE_OK && result != SQLITE_ROW && result != SQLITE_DONE else { return }
        throw SQLiteError(
            extendedCode: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), sql: sql
        )
    }

    /// The raw handle, for the statement wrapper only.
    var rawHandle: OpaquePointer { handle }
}

@available(*, unavailable, message: "SQLite connections have one owner; open one per thread")
extension SQLiteConnection: Sendable {}
