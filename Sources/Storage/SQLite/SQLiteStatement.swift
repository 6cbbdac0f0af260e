internal import CSQLite

/// A value bound to, or read from, a statement column.
package enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// One prepared statement; the only place that holds a `sqlite3_stmt*`.
package final class SQLiteStatement {
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
    package func bind(_ values: [SQLiteValue]) throws(SQLiteError) -> SQLiteStatement {
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
    package func run(_ values: [SQLiteValue] = []) throws(SQLiteError) {
        try bind(values)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Runs a query and maps each row.
    package func rows<T>(_ values: [SQLiteValue] = [], _ transform: (SQLiteRow) throws -> T) throws -> [T] {
        try bind(values)
        defer { sqlite3_reset(handle) }
        var result: [T] = []
        while try step() { result.append(try transform(SQLiteRow(statement: self))) }
        return result
    }

    /// Runs a query and maps its first row, if any.
    package func firstRow<T>(_ values: [SQLiteValue] = [], _ transform: (SQLiteRow) throws -> T) throws -> T? {
        try bind(values)
        defer { sqlite3_reset(handle) }
        return try step() ? transform(SQLiteRow(statement: self)) : nil
    }

    /// The result columns by name (as the query names them, `AS` included), read once per statement:
    /// statements are cached, so rows read by name pay a dictionary lookup, not a scan.
    fileprivate lazy var columnIndexes: [String: Int32] = {
        var indexes: [String: Int32] = [:]
        for index in 0..<sqlite3_column_count(handle) {
            if let name = sqlite3_column_name(handle, index) {
                indexes[String(cString: name)] = index
            }
        }
        return indexes
    }()

    fileprivate func columnValue(_ index: Int32) -> SQLiteValue {
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

/// The current row of a running query, read by column name; a column the query lacks, or a NULL
/// where a value is required, throws rather than passing as an empty value.
///
/// - Important: Valid only inside the closure it is passed to; the statement moves on after it.
package struct SQLiteRow {
    fileprivate let statement: SQLiteStatement

    /// The value of column `name`, NULL included.
    /// - Throws: `StorageError` when the query has no such column (the schema and the code drifted).
    package subscript(_ name: String) -> SQLiteValue {
        get throws(StorageError) {
            guard let index = statement.columnIndexes[name] else {
                throw StorageError("the query has no column \(name): \(statement.sql)")
            }
            return statement.columnValue(index)
        }
    }

    package func text(_ name: String) throws(StorageError) -> String { try required(name, optionalText(name)) }
    package func int(_ name: String) throws(StorageError) -> Int64 { try required(name, optionalInt(name)) }
    package func double(_ name: String) throws(StorageError) -> Double { try required(name, optionalDouble(name)) }
    package func blob(_ name: String) throws(StorageError) -> [UInt8] { try required(name, optionalBlob(name)) }

    /// `nil` for NULL; a value of another type throws.
    package func optionalText(_ name: String) throws(StorageError) -> String? {
        switch try self[name] {
        case .null: return nil
        case .text(let value): return value
        case let other: throw mismatch(name, other, "text")
        }
    }

    package func optionalInt(_ name: String) throws(StorageError) -> Int64? {
        switch try self[name] {
        case .null: return nil
        case .integer(let value): return value
        case let other: throw mismatch(name, other, "an integer")
        }
    }

    package func optionalDouble(_ name: String) throws(StorageError) -> Double? {
        switch try self[name] {
        case .null: return nil
        case .real(let value): return value
        case .integer(let value): return Double(value)
        case let other: throw mismatch(name, other, "a number")
        }
    }

    package func optionalBlob(_ name: String) throws(StorageError) -> [UInt8]? {
        switch try self[name] {
        case .null: return nil
        case .blob(let value): return value
        case let other: throw mismatch(name, other, "a blob")
        }
    }

    /// A text column holding a raw value of `T` (a status, a kind); any other text is thrown.
    package func value<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) throws(StorageError) -> T
    where T.RawValue == String {
        try required(name, optionalValue(name, as: type))
    }

    package func optionalValue<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) throws(StorageError) -> T?
    where T.RawValue == String {
        guard let text = try optionalText(name) else { return nil }
        guard let value = T(rawValue: text) else {
            throw StorageError("column \(name) holds \(text), which is no \(T.self): \(statement.sql)")
        }
        return value
    }

    private func required<T>(_ name: String, _ value: T?) throws(StorageError) -> T {
        guard let value else { throw StorageError("column \(name) is NULL: \(statement.sql)") }
        return value
    }

    private func mismatch(_ name: String, _ value: SQLiteValue, _ expected: String) -> StorageError {
        StorageError("column \(name) holds \(value), not \(expected): \(statement.sql)")
    }
}
