/// How the database file is opened. Every pragma is set explicitly at open, never left to defaults.
public struct StorageConfiguration: Sendable {
    /// How hard SQLite pushes a commit to disk before COMMIT returns.
    public enum Synchronous: String, Sendable, CaseIterable {
        /// In WAL mode a commit survives a process crash (`kill -9`); a power loss or kernel crash may
        /// lose the last commits before a checkpoint, never corrupting the file.
        case normal = "NORMAL"
        /// Every commit is synced to the device before COMMIT returns; survives a power loss too.
        case full = "FULL"
    }

    /// Directory holding the database file; created if missing.
    public var dataDirectory: String
    /// The database file's name inside `dataDirectory`.
    public var fileName = "deliveryd.sqlite3"
    public var synchronous: Synchronous
    /// How long a connection waits for another one's lock before giving up with `SQLITE_BUSY`.
    public var busyTimeoutMilliseconds: Int32 = 5000
    /// Page cache per connection, in KiB: large tables need their index pages cached (64 MiB per
    /// connection; SQLite's own default is 2 MiB).
    public var cacheSizeKiB = 65_536
    /// WAL pages after which a commit checkpoints by itself (80 MiB of WAL), a backstop for when
    /// nobody calls `Database.checkpoint()`.
    public var writerCheckpointPages = 20_000

    /// - Parameters:
    ///   - dataDirectory: default `./var`, as `deliveryd` uses with no configuration.
    ///   - synchronous: default `.full`: an acknowledged change survives a power loss as well as a crash.
    public init(dataDirectory: String = "./var", synchronous: Synchronous = .full) {
        self.dataDirectory = dataDirectory
        self.synchronous = synchronous
    }

    /// The full path of the database file.
    public var databasePath: String {
        dataDirectory.hasSuffix("/") ? dataDirectory + fileName : dataDirectory + "/" + fileName
    }
}
