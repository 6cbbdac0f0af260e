internal import CSQLite

/// A failed SQLite call, with SQLite's own code and message.
///
/// Equality compares codes only; `message` and `sql` are context for logs.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite's primary result code (the low byte of an extended code).
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let error = Code(rawValue: SQLITE_ERROR)
        public static let busy = Code(rawValue: SQLITE_BUSY)
        public static let locked = Code(rawValue: SQLITE_LOCKED)
        public static let readOnly = Code(rawValue: SQLITE_READONLY)
        public static let ioError = Code(rawValue: SQLITE_IOERR)
        public static let corrupt = Code(rawValue: SQLITE_CORRUPT)
        public static let full = Code(rawValue: SQLITE_FULL)
        public static let cantOpen = Code(rawValue: SQLITE_CANTOPEN)
        public static let constraint = Code(rawValue: SQLITE_CONSTRAINT)
        public static let misuse = Code(rawValue: SQLITE_MISUSE)
    }

    public let code: Code
    public let extendedCode: Int32
    public let message: String
    public let sql: String?

    init(extendedCode: Int32, message: String, sql: String? = nil) {
        self.code = Code(rawValue: extendedCode & 0xFF)
        self.extendedCode = extendedCode
        self.message = message
        self.sql = sql
    }

    public var description: String {
        "SQLite error \(extendedCode): \(message)" + (sql.map { " (in: \($0))" } ?? "")
    }

    public static func == (lhs: SQLiteError, rhs: SQLiteError) -> Bool { lhs.code == rhs.code }
}
