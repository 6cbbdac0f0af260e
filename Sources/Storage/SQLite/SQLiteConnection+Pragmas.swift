extension SQLiteConnection {
    /// Opens a connection with the pragmas deliveryd relies on: WAL, foreign keys, the configured
    /// `synchronous` level and busy timeout, and `secure_delete=FAST`, which zeroes what a change
    /// frees on the pages it writes anyway, so that erased personal data does not linger in them.
    package static func open(_ configuration: StorageConfiguration, readOnly: Bool = false) throws(SQLiteError)
        -> SQLiteConnection
    {
        let connection = try SQLiteConnection(path: configuration.databasePath, readOnly: readOnly)
        connection.setBusyTimeout(milliseconds: configuration.busyTimeoutMilliseconds)
        if !readOnly {
            try connection.execute("PRAGMA journal_mode=WAL")
        }
        try connection.execute(
            """
            PRAGMA foreign_keys=ON;
            PRAGMA secure_delete=FAST;
            PRAGMA synchronous=\(configuration.synchronous.rawValue);
            PRAGMA cache_size=-\(configuration.cacheSizeKiB);
            """
        )
        return connection
    }

    /// The journal mode SQLite reports (`wal` once WAL is on).
    package func journalMode() throws -> String {
        try cached("PRAGMA journal_mode").firstRow { try $0.text("journal_mode") } ?? ""
    }
}
