internal import CSQLite

/// One prepared statement; the only place that holds a `sqlite3_stmt*`.
package final class SQLiteStatement: SQLStatement {
    private let handle: OpaquePointer
    private unowned let connection: SQLiteConnection
    package let sql: String

    init(connection: SQLiteConnection, sql: String) throws(SQLiteError) {
        var pointer: OpaquePointer?
        let result = sqlite3_prepare_v3(connection.rawHandle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil)
        guard result == SQLITE_OK, let pointer else {
            sqlite3_finalize(pointer)
            try connection.check(result, sql: sql)
            throw SQLiteError(extendedCode: SQLITE_MISUSE, message: "empty statement", sql: sql)
        }
        self.handle = pointer
        self.connection = connection
        self.sql = sql
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// Makes the statement ready to run again with new bindings.
    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds values to the `?` parameters, left to right.
    @discardableResult
    package func bind(_ values: [DatabaseValue]) throws(SQLiteError) -> SQLiteStatement {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let result: Int32
            switch value {
            case .null: result = sqlite3_bind_null(handle, index)
            case .integer(let number): result = sqlite3_bind_int64(handle, index, number)
            case .real(let number): result = sqlite3_bind_double(handle, index, number)
            case .text(let text): result = sqlite3_bind_text(handle, index, text, -1, csqlite_transient())
            case .blob(let bytes):
                result = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), csqlite_transient())
                }
            }
            try connection.check(result, sql: sql)
        }
        return self
    }

    /// Advances to the next row; `false` when the statement is done.
    package func step() throws(SQLiteError) -> Bool {
        let result = sqlite3_step(handle)
        if result == SQLITE_ROW { return true }
        if result == SQLITE_DONE { return false }
        let error = SQLiteError(
            extendedCode: sqlite3_extended_errcode(connection.rawHandle),
            message: String(cString: sqlite3_errmsg(connection.rawHandle)), sql: sql
        )
        sqlite3_reset(handle)
        throw error
    }

    /// Runs a statement that returns no rows.
    package func run(_ values: [DatabaseValue]) throws(SQLiteError) {
        try bind(values)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Runs a query and maps each row.
    package func rows<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> [T] {
        try bind(values)
        defer { sqlite3_reset(handle) }
        var result: [T] = []
        while try step() { result.append(try transform(SQLiteRow(statement: self))) }
        return result
    }

    /// Runs a query and maps its first row, if any.
    package func firstRow<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> T? {
        try bind(values)
        defer { sqlite3_reset(handle) }
        return try step() ? transform(SQLiteRow(statement: self)) : nil
    }

    /// The result columns' names (as the query names them, `AS` included), in order, read once per
    /// statement: statements are cached.
    private lazy var columnNames: [String] = (0..<sqlite3_column_count(handle)).map { index in
        sqlite3_column_name(handle, index).map { String(cString: $0) } ?? ""
    }

    /// A name the query repeats reads its last column, as a lookup by name always did.
    private lazy var columnIndexes: [String: Int32] = Dictionary(
        columnNames.enumerated().map { ($0.element, Int32($0.offset)) }, uniquingKeysWith: { _, last in last })

    /// Whether a column is the one its name reads (false for the earlier columns of a repeated name).
    private lazy var readByItsName: [Bool] = columnNames.enumerated().map {
        columnIndexes[$0.element] == Int32($0.offset)
    }

    /// Where the next read by name is expected. Decoders read a row's columns mostly in the order
    /// the query lists them, so a read costs one comparison of names, not a hashed lookup (which was
    /// 1 % of the process's CPU under load).
    private var expectedColumn = 0

    fileprivate func columnIndex(_ name: String) -> Int32? {
        let names = columnNames
        if expectedColumn < names.count, names[expectedColumn] == name, readByItsName[expectedColumn] {
            expectedColumn += 1
            return Int32(expectedColumn - 1)
        }
        guard let index = columnIndexes[name] else { return nil }
        expectedColumn = Int(index) + 1
        return index
    }

    fileprivate func columnValue(_ index: Int32) -> DatabaseValue {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, index))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(handle, index) else { return .null }
            let count = Int(sqlite3_column_bytes(handle, index))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, index))
            guard let bytes = sqlite3_column_blob(handle, index), count > 0 else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }
}

@available(*, unavailable, message: "statements belong to their connection's owner")
extension SQLiteStatement: Sendable {}

/// The current row of a running query (see `DatabaseRow`).
///
/// - Important: Valid only inside the closure it is passed to; the statement moves on after it.
package struct SQLiteRow: DatabaseRow {
    fileprivate let statement: SQLiteStatement

    package var query: String { statement.sql }

    package subscript(_ name: String) -> DatabaseValue {
        get throws(StorageError) {
            guard let index = statement.columnIndex(name) else {
                throw StorageError("the query has no column \(name): \(statement.sql)")
            }
            return statement.columnValue(index)
        }
    }
}
