/// What the database did when a storage call failed: a stable code, a message for logs, and the
/// backend's own result behind it.
///
/// It says nothing of the domain: a refusal of the domain raised inside a write passes through as
/// its own error (`OrderError`), never wrapped in this. Equality compares codes only.
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure the service tells apart; a backend maps its own codes onto them.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case full
            case busy
            case limitReached = "limit_reached"
            case constraint
            case corrupt
            case io
            case unavailable
            case failed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The disk is full: nothing was stored; a retry may succeed once space is freed.
        public static let full = Code(.full)
        /// The database was locked by another writer past the wait: nothing was stored; retry.
        public static let busy = Code(.busy)
        /// A cap on registrations was reached inside the write (nothing was written); see `limit`.
        public static let limitReached = Code(.limitReached)
        /// A uniqueness or other constraint refused the write: a bug of ours or a race it guards.
        public static let constraint = Code(.constraint)
        /// The database file is damaged.
        public static let corrupt = Code(.corrupt)
        /// The operating system failed a read or write.
        public static let io = Code(.io)
        /// The database cannot be reached (a server restarting, a network gone): nothing was stored;
        /// retry once it is back.
        public static let unavailable = Code(.unavailable)
        /// Anything else: opening, schema, a missing or malformed column, misuse.
        public static let failed = Code(.failed)

        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }
    }

    public let code: Code
    public let message: String
    /// The backend's own result, for logs: `SQLite 13`, a PostgreSQL SQLSTATE.
    public let underlying: String?
    /// With `limitReached`: which cap.
    public let limit: LimitReached?

    package init(_ code: Code, _ message: String, underlying: String? = nil, limit: LimitReached? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.limit = limit
    }

    /// A failure of ours with no backend code behind it (`failed`).
    package init(_ message: String) {
        self.init(.failed, message)
    }

    init(limit: LimitReached) {
        self.init(.limitReached, limit.description, limit: limit)
    }

    init(sqlite: SQLiteError) {
        let code: Code =
            switch sqlite.code {
            case .full: .full
            case .busy, .locked: .busy
            case .constraint: .constraint
            case .corrupt: .corrupt
            case .ioError: .io
            default: .failed
            }
        self.init(code, sqlite.description, underlying: "SQLite \(sqlite.extendedCode)")
    }

    public var description: String {
        "\(code): \(message)" + (underlying.map { " [\($0)]" } ?? "")
    }

    /// Any error of a storage call as the `StorageError` it stands for: itself, SQLite's and a cap's
    /// mapped, anything else `failed` with `context` (what was being done).
    package init(_ error: any Error, context: String) {
        switch error {
        case let error as StorageError: self = error
        case let error as SQLiteError: self.init(sqlite: error)
        case let error as LimitReached: self.init(limit: error)
        default: self.init("\(context): \(error)")
        }
    }

    public static func == (lhs: StorageError, rhs: StorageError) -> Bool { lhs.code == rhs.code }
}

/// A registration refused because its owner has as many as it may: live activities of an order,
/// push-to-start devices of a customer.
public struct LimitReached: Error, Sendable, Equatable, CustomStringConvertible {
    public let what: String
    public let limit: Int

    public var description: String { "at most \(limit) \(what)" }
}
