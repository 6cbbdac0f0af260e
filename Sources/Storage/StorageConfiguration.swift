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
    public var fileName: String
    public var synchronous: Synchronous
    /// How long a connection waits for another one's lock before giving up with `SQLITE_BUSY`.
    public var busyTimeoutMilliseconds: Int32
    /// Page cache per connection, in KiB; large tables need their index pages cached.
    public var cacheSizeKiB: Int
    /// WAL pages after which a commit checkpoints by itself, a backstop for when nobody calls
    /// `Database.checkpoint()`.
    public var writerCheckpointPages: Int

    /// - Parameters:
    ///   - dataDirectory: default `./var`, as `deliveryd` uses with no configuration.
    ///   - fileName: default `deliveryd.sqlite3`.
    ///   - synchronous: default `.full`: an acknowledged change survives a power loss as well as a crash.
    ///   - busyTimeoutMilliseconds: default 5000.
    ///   - cacheSizeKiB: default 65536 (64 MiB per connection; SQLite's own default is 2 MiB).
    ///   - writerCheckpointPages: default 20000 pages (80 MiB of WAL).
    public init(
        dataDirectory: String = "./var",
        fileName: String = "deliveryd.sqlite3",
        synchronous: Synchronous = .full,
        busyTimeoutMilliseconds: Int32 = 5000,
        cacheSizeKiB: Int = 65_536,
        writerCheckpointPages: Int = 20_000
    ) {
        self.writerCheckpointPages = writerCheckpointPages
        self.cacheSizeKiB = cacheSizeKiB
        self.dataDirectory = dataDirectory
        self.fileName = fileName
        self.synchronous = synchronous
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
    }

    /// The full path of the database file.
    public var databasePath: String {
        dataDirectory.hasSuffix("/") ? dataDirectory + fileName : dataDirectory + "/" + fileName
    }
}
