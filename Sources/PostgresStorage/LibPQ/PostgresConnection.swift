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
    /// Rows the last statement run by `query` changed (`SQLSession.changes`).
    package private(set) var changes = 0

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
        try connection.execute("SET statement_timeout = \(max(0, statementTimeout))")
        return connection
    }

    /// Whether the connection is still up as far as libpq knows (it learns of a loss on the next call).
    package var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// The server's version number (`150018` for 15.18).
    package var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// Runs SQL without parameters, several statements allowed (migrations, `SET`, `BEGIN`).
    package func execute(_ sql: String) throws(StorageError) {
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
    /// time under a name of its own.
    @discardableResult
    package func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws(StorageError) -> PostgresRows {
        let name = try preparedName(for: sql)
        var values: [[CChar]?] = []
        var formats: [Int32] = []
        for parameter in parameters {
            let (bytes, binary) = Self.encode(parameter)
            values.append(bytes?.map { CChar(bitPattern: $0) })
            formats.append(binary ? 1 : 0)
        }
        let lengths = values.map { Int32($0?.count ?? 0) }
        let result = withCArray(values) { pointers in
            PQexecPrepared(handle, name, Int32(parameters.count), pointers, lengths, formats, 0)
        }
        defer { PQclear(result) }
        try check(result, sql: sql)
        let rows = PostgresRows(result!, query: sql)
        changes = rows.affected
        return rows
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
        let name = "deliveryd_\(statementNames.count + 1)"
        let result = PQprepare(handle, name, sql, 0, nil)
        defer { PQclear(result) }
        try check(result, sql: sql)
        statementNames[sql] = name
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
    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }
}
