/// A `DeliveryStore` whose every operation is SQL on a `SQLSession`.
///
/// A backend gives only its sessions: how a read transaction and a write transaction are opened,
/// committed and undone. The operations themselves are written once, in this module's extensions of
/// this protocol, so SQLite's `Database` and the PostgreSQL store run the same statements and cannot
/// drift apart in what they store.
package protocol SQLStore: DeliveryStore {
    /// Runs `body` to read: each statement sees only committed data (SQLite: all of them in one read
    /// transaction; PostgreSQL: each as of its own start, which spares two round trips a read).
    func readSession<T>(_ body: (any SQLSession) throws -> T) throws(StorageError) -> T

    /// Runs `body` inside a write transaction and returns its value once that transaction committed.
    /// What `body` throws passes through as it is (an `OrderError` refusal stays one) and undoes
    /// its writes.
    func writeSession<T>(_ body: (any SQLSession) throws -> T) throws -> T

    /// `writeSession` for a caller that must not block a thread while the commit waits.
    /// - Parameter orderID: the order `body` locks first, if it is known before it runs (see
    ///   `DeliveryStore.write(lockingOrder:_:completion:)`).
    func writeSession<T>(
        lockingOrder orderID: String?, _ body: @escaping @Sendable (any SQLSession) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void)

    /// Drops what the engine still keeps of rows an erasure overwrote (SQLite's write-ahead log,
    /// PostgreSQL's dead row versions), so that erased data is not left in the database's files.
    func discardErasedCopies() throws(StorageError)
}

extension SQLStore {
    /// `writeSession`, its errors as `StorageError`.
    func writeSQL<T>(_ body: (any SQLSession) throws -> T) throws(StorageError) -> T {
        do {
            return try writeSession(body)
        } catch {
            throw StorageError(error, context: "write failed")
        }
    }

    /// Runs `body` in one write transaction and returns its value once the transaction committed.
    /// - Throws: what `body` threw, as it is (an `OrderError` refusal stays one), or `StorageError`.
    public func write<T>(_ body: (any StoreTransaction) throws -> T) throws -> T {
        try writeSession { session in try body(SQLTransaction(connection: session)) }
    }

    /// `write` for a caller that must not block a thread while its commit waits: `completion` gets
    /// the outcome once the transaction that holds the write committed or failed.
    public func write<T: Sendable>(
        lockingOrder orderID: String?, _ body: @escaping @Sendable (any StoreTransaction) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        writeSession(
            lockingOrder: orderID, { session in try body(SQLTransaction(connection: session)) },
            completion: completion)
    }
}

/// The namespace of the statements and row codecs the SQL stores share.
enum StoreSQL {}
