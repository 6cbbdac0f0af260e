public import Storage

/// deliveryd's store on PostgreSQL, for several nodes sharing one (replicated) database.
///
/// Every operation is the SQL `SQLStore` shares with SQLite, run on a connection of the pool:
/// a write in a transaction of its own (`READ COMMITTED`; the order a change applies to is locked
/// with `FOR UPDATE`, so two nodes changing one order take turns, and the outbox is claimed with
/// `SKIP LOCKED`, so two pushers take different rows); a read statement by statement, outside any
/// (see `readSession`). Nodes coordinate through the database only.
public final class PostgresStore: Sendable {
    private let pool: PostgresPool
    /// Where writes whose caller must not block wait for a connection and their commit: batched,
    /// several in one transaction, by up to a quarter of the pool's connections. With the default
    /// pool of 8, two writers carried as many changes as four (1,470-1,709 against 1,247-1,793 a
    /// second in alternated runs) at a lower POST p99 (70-92 against 104-153 ms): fewer, larger
    /// transactions on a database that shares the machine's two cores.
    private let batcher: PostgresWriteBatcher

    private init(pool: PostgresPool) {
        self.pool = pool
        batcher = PostgresWriteBatcher(pool: pool, writerLimit: pool.configuration.size / 4)
    }

    /// Connects to `url`, brings the schema up to date and returns the store.
    /// - Parameters:
    ///   - poolSize: connections at most (each node holds up to this many).
    /// - Throws: `StorageError` `unavailable` when the server cannot be reached, or a migration's error.
    public static func open(url: String, poolSize: Int = 8) throws(StorageError) -> PostgresStore {
        var configuration = PostgresPool.Configuration(url: url)
        configuration.size = poolSize
        let pool = PostgresPool(configuration)
        let migrations = try PostgresMigrator.bundled()
        do {
            _ = try pool.withConnection { connection in try PostgresMigrator.migrate(connection, migrations) }
        } catch {
            throw StorageError(error, context: "cannot prepare the PostgreSQL database")
        }
        return PostgresStore(pool: pool)
    }

    /// The pool's connections and whether the server answers: for readiness and metrics.
    package var health: ConnectionPoolHealth { pool.health }

    /// The applied schema versions, oldest first.
    public func schemaVersions() throws(StorageError) -> [Int] {
        try readSession { session in
            try session.cached("SELECT version FROM schema_migrations ORDER BY version").rows([]) {
                Int(try $0.int("version"))
            }
        }
    }
}

extension PostgresStore: SQLStore {
    /// Reads run outside a transaction: each statement sees what was committed when it began, and a
    /// read costs one round trip instead of three (BEGIN, the query, COMMIT). The reads of several
    /// statements (a push batch's context) may see a change land between two of them; that change
    /// queued its own push, so nothing is planned from a state that stays wrong.
    package func readSession<T>(_ body: (any SQLSession) throws -> T) throws(StorageError) -> T {
        do {
            return try onLiveConnection { connection in
                do {
                    return try body(connection)
                } catch let error as StorageError where error.code == .unavailable && !connection.isOpen {
                    throw LostBeforeWriting(error: error)  // a read changes nothing: safe to run again
                }
            }
        } catch {
            throw StorageError(error, context: "read failed")
        }
    }

    package func writeSession<T>(_ body: (any SQLSession) throws -> T) throws -> T {
        try transaction(begin: "BEGIN", body)
    }

    package func writeSession<T>(
        lockingOrder orderID: String?, _ body: @escaping @Sendable (any SQLSession) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        batcher.submit(
            PostgresWriteBatcher.Write(
                lockingOrder: orderID,
                attempt: { session in
                    let value = try body(session)
                    return { completion(.success(value)) }
                },
                alone: { completion(Result { try self.writeSession(body) }) },
                fail: { completion(.failure($0)) }))
    }

    /// A session advisory lock named after the task, tried and not waited for, held on a connection
    /// of its own while `body` runs: a node that dies mid-task loses its connection and so the lock,
    /// and the next node to try takes the task over.
    public func exclusively<T>(_ task: String, _ body: () throws -> T) throws -> T? {
        try pool.withConnection { connection in
            let key = DatabaseValue.text("deliveryd task " + task)
            let locked = try connection.query(
                "SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked", [key]
            ).first?.int("locked")
            guard locked == 1 else { return nil }
            defer { _ = try? connection.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [key]) }
            return try body()
        }
    }

    /// PostgreSQL keeps an erased row's old version until VACUUM removes it; this runs it on the
    /// tables an erasure rewrites, so the erased data does not outlive the request by much.
    package func discardErasedCopies() throws(StorageError) {
        do {
            try pool.withConnection { connection in try connection.execute("VACUUM orders, order_events") }
        } catch {
            throw StorageError(error, context: "vacuum after erasure failed")
        }
    }

    /// Runs `attempt` on a pooled connection, and once more on another if the first was found gone
    /// before anything was written with it: an idle connection from before a database restart or a
    /// failover fails at its first use (the pool then drops it), and the caller need not see that.
    private func onLiveConnection<T>(_ attempt: (PostgresConnection) throws -> T) throws -> T {
        do {
            return try pool.withConnection(attempt)
        } catch is LostBeforeWriting {
            do {
                return try pool.withConnection(attempt)
            } catch let lost as LostBeforeWriting {
                throw lost.error
            }
        }
    }

    /// Runs `body` on a pooled connection between `begin` and COMMIT; anything thrown rolls back.
    /// A lost connection is not lent again (the pool drops it), so nothing half-done is reused.
    ///
    /// `BEGIN` goes out with the transaction's first statement, so a connection found lost there
    /// (an idle one from before a restart) is found by `body`: that first round trip wrote nothing
    /// the server kept, and `body`, which did nothing but send before it, runs again on another.
    private func transaction<T>(begin: String, _ body: (any SQLSession) throws -> T) throws -> T {
        try onLiveConnection { connection in
            let roundTrips = connection.roundTrips
            defer { connection.lockedOrders.forget() }  // reads ahead end with their transaction
            do {
                try connection.begin(begin)
                let value = try body(connection)
                try connection.commit()
                return value
            } catch let error as StorageError
                where error.code == .unavailable && !connection.isOpen && connection.roundTrips == roundTrips + 1
            {
                throw LostBeforeWriting(error: error)
            } catch {
                if connection.isOpen { try? connection.rollback() }
                throw error
            }
        }
    }
}

/// The connection was found lost before the work wrote anything: the work may run on another.
private struct LostBeforeWriting: Error {
    let error: StorageError
}
