internal import Foundation
internal import Storage

/// The writes of callers that do not block a thread on them (the API's requests), taken by a few
/// writer threads in batches: a batch is one transaction on one connection, so the `BEGIN`, the
/// commit with its WAL flush, and a thread's wake-ups are shared by its writes, as SQLite's group
/// commit shares a sync. The writes of one batch run one after another, each seeing the ones before.
///
/// - A write that fails having only read (a domain refusal after reading the order) is answered
///   with its failure after the batch commits; the batch goes on.
/// - A write that fails otherwise (after writing, a statement refused, a lock timeout, a deadlock
///   with another batch) rolls its batch back, and each write of the batch then runs again alone, in
///   order, answering with its own outcome. A write's body reads and writes only through its session
///   and may run more than once before it commits: until then nothing of it is kept.
/// - A commit whose connection was lost is every write's failure: whether it took effect is not
///   known, and running the writes again could apply them twice.
/// - A write waits for a writer at most the pool's `acquireTimeout`, then fails `busy` (503 with
///   `Retry-After`), as a caller waiting for a connection would: the queue never grows without bound
///   behind a slow database.
/// - Writer threads start with the load, up to `writerLimit`, and end after a second without work.
/// - The orders the writes name ahead (`lockingOrder`) are read and locked in one statement with
///   the batch's `BEGIN`, so that a write's `lockOrder` of its order waits for nothing: a write
///   waits on the server only where it reads something else.
///
/// - Note: `@unchecked Sendable` is sound: `pending`, `running` and `waiting` are read and written
///   only while `condition` is locked; the rest are constants.
final class PostgresWriteBatcher: @unchecked Sendable {
    struct Write: Sendable {
        /// The order the write locks first, when known before it runs.
        var lockingOrder: String? = nil
        /// Runs the write in the batch's transaction; what it returns answers the caller after the commit.
        let attempt: @Sendable (PostgresConnection) throws -> () -> Void
        /// Runs the write in a transaction of its own and answers the caller.
        let alone: @Sendable () -> Void
        /// Answers the caller with a failure.
        let fail: @Sendable (any Error) -> Void
    }

    private let pool: PostgresPool
    private let writerLimit: Int
    private let batchLimit: Int
    private let condition = NSCondition()
    private var pending: [(write: Write, submitted: ContinuousClock.Instant)] = []
    private var running = 0
    private var waiting = 0

    /// - Parameters:
    ///   - writerLimit: writer threads at most, each holding one of the pool's connections while it
    ///     writes a batch; the rest of the pool serves reads and the pushers.
    ///   - batchLimit: writes at most in one transaction.
    init(pool: PostgresPool, writerLimit: Int, batchLimit: Int = 32) {
        self.pool = pool
        self.writerLimit = max(1, writerLimit)
        self.batchLimit = max(1, batchLimit)
    }

    func submit(_ write: Write) {
        condition.lock()
        defer { condition.unlock() }
        pending.append((write, .now))
        if waiting > 0 {
            condition.signal()
        } else if running < writerLimit {
            running += 1
            Thread.detachNewThread { self.work() }
        }
    }

    private func work() {
        condition.lock()
        while true {
            guard pending.isEmpty else {
                let taken = pending.prefix(batchLimit)
                pending.removeFirst(taken.count)
                condition.unlock()
                let oldest = ContinuousClock.now - .seconds(pool.configuration.acquireTimeout)
                for late in taken where late.submitted < oldest {
                    late.write.fail(
                        StorageError(
                            .busy, "no database writer came free within \(pool.configuration.acquireTimeout) s"))
                }
                let batch = taken.filter { $0.submitted >= oldest }.map(\.write)
                if !batch.isEmpty { run(batch) }
                condition.lock()
                continue
            }
            waiting += 1
            let woken = condition.wait(until: Date().addingTimeInterval(1))
            waiting -= 1
            if !woken, pending.isEmpty {
                running -= 1
                condition.unlock()
                return
            }
        }
    }

    private func run(_ batch: [Write]) {
        guard batch.count > 1 else { return batch[0].alone() }
        var answers: [() -> Void] = []
        answers.reserveCapacity(batch.count)
        var committing = false
        do {
            try pool.withConnection { connection in
                defer { connection.lockedOrders.forget() }
                do {
                    try connection.begin("BEGIN")
                    let named = batch.compactMap(\.lockingOrder)
                    if !named.isEmpty { try connection.lockedOrders.readLocking(named, on: connection) }
                    for write in batch {
                        let writesBefore = connection.writes
                        do {
                            answers.append(try write.attempt(connection))
                        } catch
                            where connection.isOpen && connection.writes == writesBefore
                            && !connection.transactionFailed
                        {
                            answers.append { write.fail(error) }
                        }
                    }
                    committing = true
                    try connection.commit()
                } catch {
                    if connection.isOpen { try? connection.rollback() }
                    throw error
                }
            }
        } catch let error as StorageError where committing && error.code == .unavailable {
            for write in batch { write.fail(error) }
            return
        } catch {
            for write in batch { write.alone() }
            return
        }
        for answer in answers { answer() }
    }
}
