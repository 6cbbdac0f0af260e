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
    private let committer: GroupCommitter
    public let configuration: StorageConfiguration

    private init(
        writer: SQLiteConnection, readers: [SQLiteConnection], checkpointer: SQLiteConnection,
        configuration: StorageConfiguration
    ) {
        let writer = LockedConnection(writer)
        self.writer = writer
        let syncsWAL = configuration.synchronous == .full
        self.committer = GroupCommitter(syncingWALOf: syncsWAL ? configuration.databasePath : nil) { work in
            writer.withConnection(work)
        }
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
            // Each write of a group commit runs in a savepoint, whose journal (the pages' contents
            // before it) outgrows SQLite's 64 KiB within a group and then went to a temporary file,
            // a `pwrite` per page inside the writer's transaction. In memory it is a copy; what the
            // writer sorts or collects (a prune's ids) is held in memory too.
            try writer.execute("PRAGMA temp_store=MEMORY")
            if configuration.synchronous == .full {
                // FULL's sync after each commit moves to the group committer's syncer, so that the
                // writer goes on while the disk confirms (see `WALSyncer`); migrations ran at FULL.
                try writer.execute("PRAGMA synchronous=NORMAL")
            }
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
            try connection.cached("SELECT version FROM schema_migrations ORDER BY version").rows {
                Int(try $0.int("version"))
            }
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
                    (Int(try $0.int("log")), Int(try $0.int("checkpointed")))
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
    /// `GroupCommitter`); its value is returned only after that transaction's COMMIT. An error of the
    /// caller's (an `OrderError` refusal) passes through as it is.
    func writeConnectionPassingThrough<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let box = OutcomeBox<T>()
            committer.submit(box.pendingWrite(body))
            return try box.result.get()
        }
    }

    /// `writeConnectionPassingThrough` without waiting: `completion` gets the outcome after the commit.
    func writeConnection<T>(
        _ body: @escaping (SQLiteConnection) throws -> T, completion: @escaping (Result<T, any Error>) -> Void
    ) {
        let box = OutcomeBox<T>()
        committer.submit(box.pendingWrite(body) { completion(box.result) })
    }

    /// Writes per commit so far: how much the group commit saves.
    public var commitStatistics: GroupCommitStatistics { committer.statistics }

    /// Writes waiting for a group of their own (tests wait on it to order writes they queue).
    package var queuedWrites: Int { committer.queuedWrites }

    /// Runs `body` on a reader connection, inside one read transaction for a consistent view
    /// (or outside any, for statements such as `VACUUM INTO` that refuse to run in one).
    func read<T>(inTransaction: Bool = true, _ body: (SQLiteConnection) throws -> T) throws(StorageError) -> T {
        let index = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue % readers.count
        do {
            return try readers[index].withConnection { connection in
                guard inTransaction else { return try body(connection) }
                try connection.executeCached("BEGIN")
                defer { try? connection.executeCached("COMMIT") }
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
///   blocked on its turn (or before it calls the completion), and the caller reads it after.
private final class OutcomeBox<T>: @unchecked Sendable {
    private var outcome: Result<T, any Error>?

    /// The write that runs `body` and keeps what it returned or threw here.
    func pendingWrite(_ body: @escaping (SQLiteConnection) throws -> T, completion: (() -> Void)? = nil)
        -> PendingWrite
    {
        PendingWrite(
            body: { connection in
                do {
                    self.outcome = .success(try body(connection))
                    return nil
                } catch {
                    self.outcome = .failure(error)
                    return error
                }
            },
            onFailure: { error in self.outcome = .failure(error) },
            completion: completion)
    }

    /// The outcome, with SQLite's errors and caps as `StorageError`; the body's own errors as they are.
    var result: Result<T, any Error> {
        switch outcome {
        case .success(let value): .success(value)
        case .failure(let error as LimitReached): .failure(StorageError(limit: error))
        case .failure(let error as SQLiteError): .failure(StorageError(sqlite: error))
        case .failure(let error): .failure(error)
        case nil: .failure(StorageError("the write was never run"))
        }
    }
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

extension Database: SQLStore {
    package func readSession<T>(_ body: (any SQLSession) throws -> T) throws(StorageError) -> T {
        try read { connection in try body(connection) }
    }

    package func writeSession<T>(_ body: (any SQLSession) throws -> T) throws -> T {
        try writeConnectionPassingThrough { connection in try body(connection) }
    }

    /// The order's lock is SQLite's one writer, and its read is in process: nothing to read ahead.
    package func writeSession<T>(
        lockingOrder orderID: String?, _ body: @escaping @Sendable (any SQLSession) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        writeConnection({ connection in try body(connection) }, completion: completion)
    }

    /// One process owns a data directory (the service locks it), so there is no other node to wait for.
    public func exclusively<T>(_ task: String, _ body: () throws -> T) throws -> T? {
        try body()
    }

    /// Truncates the WAL: the pages of erased rows are gone from it once copied into the file.
    package func discardErasedCopies() throws(StorageError) {
        try truncateLog()
    }
}
