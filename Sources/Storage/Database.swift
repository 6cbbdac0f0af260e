internal import Foundation
internal import OrderDomain
internal import Synchronization

/// deliveryd's SQLite database: one writer connection and a few readers, each behind its own lock.
///
/// WAL lets the readers run beside the writer; the writer's transactions are `BEGIN IMMEDIATE`, so
/// writes queue on the lock instead of failing half-way. Every method either finishes its transaction
/// (COMMIT returned) or throws and leaves nothing behind.
public final class Database: Sendable {
    private let writer: LockedConnection
    private let readers: [LockedConnection]
    private let checkpointer: LockedConnection
    private let nextReader = Atomic<Int>(0)
    private let committer = GroupCommitter()
    public let configuration: StorageConfiguration

    private init(
        writer: SQLiteConnection, readers: [SQLiteConnection], checkpointer: SQLiteConnection,
        configuration: StorageConfiguration
    ) {
        self.writer = LockedConnection(writer)
        self.checkpointer = LockedConnection(checkpointer)
        var guarded: [LockedConnection] = []
        for reader in readers { guarded.append(LockedConnection(reader)) }
        self.readers = guarded
        self.configuration = configuration
    }

    /// Creates the data directory if needed, opens the file and applies pending migrations.
    /// - Parameter readerCount: read connections beside the writer (default 2, one per core).
    /// - Throws: `StorageError` when the directory or file cannot be opened, the file was written by a
    ///   newer deliveryd, or a migration fails.
    public static func open(_ configuration: StorageConfiguration, readerCount: Int = 2) throws(StorageError)
        -> Database
    {
        try open(configuration, migrations: Migrator.bundled(), readerCount: readerCount)
    }

    package static func open(_ configuration: StorageConfiguration, migrations: [Migration], readerCount: Int = 2)
        throws(StorageError) -> Database
    {
        do {
            try FileManager.default.createDirectory(
                atPath: configuration.dataDirectory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try restrictToOwner(configuration.databasePath)
        } catch {
            throw StorageError(
                "cannot create the data directory \(configuration.dataDirectory): \(error.localizedDescription)")
        }
        do {
            let writer = try SQLiteConnection.open(configuration)
            try Migrator.migrate(writer, migrations)
            var readers: [SQLiteConnection] = []
            for _ in 0..<max(1, readerCount) {
                readers.append(try SQLiteConnection.open(configuration, readOnly: true))
            }
            // Commits leave checkpointing to `checkpoint()`, called off the request path; the writer
            // checkpoints by itself only if the WAL grows past the backstop (nobody called it).
            try writer.execute("PRAGMA wal_autocheckpoint=\(configuration.writerCheckpointPages)")
            let checkpointer = try SQLiteConnection.open(configuration)
            return Database(writer: writer, readers: readers, checkpointer: checkpointer, configuration: configuration)
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError("cannot open \(configuration.databasePath): \(error)")
        }
    }

    /// Makes the database file and its WAL and shared-memory files readable by their owner only
    /// (0600): they hold customers' contact details. New files are created so (SQLite gives the WAL
    /// and shm files the database file's mode); files an older version made with the umask's mode are
    /// corrected at open.
    private static func restrictToOwner(_ databasePath: String) throws {
        let path = databasePath
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            else { throw StorageError("cannot create \(path)") }
        }
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
    }

    /// The database file's path.
    public var path: String { configuration.databasePath }

    /// The journal mode in force (`wal`).
    public var journalMode: String {
        writer.withConnection { (try? $0.journalMode()) ?? "unknown" }
    }

    /// The applied schema versions, oldest first.
    public func schemaVersions() throws(StorageError) -> [Int] {
        try read { connection in
            try connection.cached("SELECT version FROM schema_migrations ORDER BY version").rows { Int($0.int(0) ?? 0) }
        }
    }

    /// Copies committed pages from the WAL into the database file (a passive checkpoint: it never
    /// waits for readers or the writer). Call it every second or so from a background thread, so that
    /// commits do not pay for checkpoints.
    /// - Returns: the pages in the WAL and how many of them are now in the database file.
    @discardableResult
    public func checkpoint() throws(StorageError) -> (walPages: Int, checkpointedPages: Int) {
        do {
            return try checkpointer.withConnection { connection in
                try connection.cached("PRAGMA wal_checkpoint(PASSIVE)").firstRow([]) {
                    (Int($0.int(1) ?? 0), Int($0.int(2) ?? 0))
                } ?? (0, 0)
            }
        } catch {
            throw StorageError(error, context: "checkpoint failed")
        }
    }

    /// Copies the WAL into the database file and truncates it to nothing, waiting for readers.
    func truncateLog() throws(StorageError) {
        do {
            try checkpointer.withConnection { connection in
                try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw StorageError(error, context: "checkpoint failed")
        }
    }

    /// Runs `body` in a write transaction, shared with concurrent callers' writes (see
    /// `GroupCommitter`); its value is returned only after that transaction's COMMIT. Called from
    /// inside `atomically`, it joins that transaction instead (in a savepoint of its own).
    func writeConnection<T>(_ body: (SQLiteConnection) throws -> T) throws(StorageError) -> T {
        do {
            return try writeConnectionPassingThrough(body)
        } catch {
            throw StorageError(error, context: "write failed")
        }
    }

    /// `write`, for a body that may refuse with an error of its caller's (an `OrderError`): that
    /// error passes through as it is; SQLite's become `StorageError`.
    func writeConnectionPassingThrough<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let outcome: Result<T, any Error>
        if let ambient = AmbientWrite.current, ambient.database == ObjectIdentifier(self) {
            outcome = Self.nested(body, on: ambient.connection)
        } else {
            outcome = submit(body, ambient: false)
        }
        do {
            return try outcome.get()
        } catch let error as LimitReached {
            throw StorageError(limit: error)
        } catch let error as SQLiteError {
            throw StorageError(sqlite: error)
        }
    }

    /// Runs `body` so that every write of this store it makes commits in one transaction, or none
    /// does: for a change and the record of its idempotency key, which must not be parted by a crash.
    ///
    /// `body` runs on the thread that leads the group commit, with the writer connection; reads it
    /// makes go to reader connections and see what was committed before. Its errors come back as thrown.
    public func atomically<T>(_ body: () throws -> T) throws -> T {
        let outcome: Result<T, any Error> = submit({ _ in try body() }, ambient: true)
        return try outcome.get()
    }

    /// Hands `body` to the group commit; with `ambient`, store writes that `body` makes join it (a
    /// plain write's body never makes any, so it skips the binding on the hot path).
    private func submit<T>(_ body: (SQLiteConnection) throws -> T, ambient bindsAmbient: Bool) -> Result<T, any Error> {
        withoutActuallyEscaping(body) { body in
            let box = OutcomeBox<T>()
            let database = ObjectIdentifier(self)
            let pending = PendingWrite(
                body: { connection in
                    do {
                        if bindsAmbient {
                            let ambient = AmbientWrite(database: database, connection: connection)
                            box.outcome = .success(
                                try AmbientWrite.$current.withValue(ambient) { try body(connection) })
                        } else {
                            box.outcome = .success(try body(connection))
                        }
                        return nil
                    } catch {
                        box.outcome = .failure(error)
                        return error
                    }
                },
                onFailure: { error in box.outcome = .failure(error) }
            )
            committer.submit(pending) { work in writer.withConnection(work) }
            return box.outcome ?? .failure(StorageError("the write was never run"))
        }
    }

    /// A write inside another: its own savepoint, so that a refusal undoes it alone.
    private static func nested<T>(_ body: (SQLiteConnection) throws -> T, on connection: SQLiteConnection)
        -> Result<T, any Error>
    {
        do {
            try connection.cached("SAVEPOINT nested_write").run([])
        } catch {
            return .failure(error)
        }
        do {
            let value = try body(connection)
            try connection.cached("RELEASE nested_write").run([])
            return .success(value)
        } catch {
            if !connection.isAutocommit {
                try? connection.cached("ROLLBACK TO nested_write").run([])
                try? connection.cached("RELEASE nested_write").run([])
            }
            return .failure(error)
        }
    }

    /// Writes per commit so far: how much the group commit saves.
    public var commitStatistics: GroupCommitStatistics { committer.statistics }

    /// Runs `body` on a reader connection, inside one read transaction for a consistent view
    /// (or outside any, for statements such as `VACUUM INTO` that refuse to run in one).
    func read<T>(inTransaction: Bool = true, _ body: (SQLiteConnection) throws -> T) throws(StorageError) -> T {
        let index = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue % readers.count
        do {
            return try readers[index].withConnection { connection in
                guard inTransaction else { return try body(connection) }
                try connection.execute("BEGIN")
                defer { try? connection.execute("COMMIT") }
                return try body(connection)
            }
        } catch {
            throw StorageError(error, context: "read failed")
        }
    }
}

/// Where a write's outcome waits for its caller.
///
/// - Note: `@unchecked Sendable` is sound: the leader thread writes `outcome` while the caller is
///   blocked on its turn, and the caller reads it after the semaphore signalled.
/// The write transaction that a write body runs in, so that store writes made from inside it (by
/// `atomically`'s body) join it rather than wait for a group commit that waits for them.
///
/// - Note: `@unchecked Sendable` is sound: it is bound only for the duration of one write body, on
///   the thread that runs that body and owns the writer connection meanwhile; nothing else sees it.
final class AmbientWrite: @unchecked Sendable {
    @TaskLocal static var current: AmbientWrite?

    let database: ObjectIdentifier
    let connection: SQLiteConnection

    init(database: ObjectIdentifier, connection: SQLiteConnection) {
        self.database = database
        self.connection = connection
    }
}

private final class OutcomeBox<T>: @unchecked Sendable {
    var outcome: Result<T, any Error>?
}

/// A connection and the lock that gives one caller at a time its use.
///
/// - Note: `@unchecked Sendable` is sound: `connection` is touched only inside `withConnection`, while
///   `lock` is held, so no two threads ever use the SQLite handle at once.
private final class LockedConnection: @unchecked Sendable {
    private let lock = NSLock()
    private let connection: SQLiteConnection

    init(_ connection: SQLiteConnection) {
        self.connection = connection
    }

    func withConnection<T>(_ body: (SQLiteConnection) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(connection)
    }
}
