internal import Foundation
internal import Synchronization

/// Lets the writes of concurrent callers share one transaction and one disk sync ("group commit").
///
/// With `synchronous=FULL` every COMMIT waits for the disk, so one transaction per request caps
/// writes at the disk's sync rate (about 1,500 a second on the machines we measured). Here a caller
/// that arrives while a commit is running queues; when that commit returns, the first queued caller
/// leads the next transaction with everything queued by then. Each write runs inside its own
/// SAVEPOINT, so a write that throws (a refused transition) rolls back alone. Nobody is answered
/// before the COMMIT that holds their write has returned (and, with a `WALSyncer`, before the disk
/// confirmed it), and if that COMMIT fails every write of the group gets its error: an acknowledged
/// write is always on disk.
final class GroupCommitter: Sendable {
    /// Writes in one transaction at most; the rest wait for the next one.
    static let maxGroupSize = 256

    private struct Queue {
        var waiting: [PendingWrite] = []
        var leaderActive = false
    }

    private let queue = Mutex(Queue())
    /// Lends the writer connection to one group's transaction.
    private let withConnection: @Sendable (_ work: (SQLiteConnection) -> Void) -> Void
    /// Where groups run when no caller waits to lead them: writes submitted with a completion lend
    /// no thread of their own.
    private let leaderQueue = DispatchQueue(label: "deliveryd.storage.group-commit")
    /// Where the completions of a committed group run (answering a request encodes its reply): on
    /// the leader's thread they held up the next group, the one thread every write waits for.
    private let completionQueue: DispatchQueue
    /// Group sizes, for the storage metrics.
    let statistics: GroupCommitStatistics
    /// Completes committed groups once the disk confirmed them; `nil` when the connection's own
    /// COMMIT is all the durability asked for (`synchronous=NORMAL`, or FULL inside SQLite).
    private let syncer: WALSyncer?

    /// - Parameter databasePath: the database whose WAL to sync after each commit, for a writer
    ///   connection at `synchronous=NORMAL` that must acknowledge only what a sync confirmed.
    init(
        syncingWALOf databasePath: String? = nil,
        withConnection: @escaping @Sendable (_ work: (SQLiteConnection) -> Void) -> Void
    ) {
        self.withConnection = withConnection
        let completionQueue = DispatchQueue(label: "deliveryd.storage.completions", attributes: .concurrent)
        let statistics = GroupCommitStatistics()
        self.completionQueue = completionQueue
        self.statistics = statistics
        self.syncer = databasePath.map {
            WALSyncer(databasePath: $0, completionQueue: completionQueue, statistics: statistics)
        }
    }

    /// Writes submitted and not yet taken into a group.
    var queuedWrites: Int { queue.withLock { $0.waiting.count } }

    /// Runs `write` in a shared write transaction. A write that waits returns once the transaction
    /// that holds it committed or failed; one with a completion returns at once, and its completion
    /// is called then.
    func submit(_ write: PendingWrite) {
        let leads = queue.withLock { queue in
            queue.waiting.append(write)
            if queue.leaderActive { return false }
            queue.leaderActive = true
            return true
        }
        if leads {
            if write.waits { leadAndWait(write) } else { leaderQueue.async { self.lead(nil) } }
            return
        }
        guard write.waits else { return }
        write.waitForTurn()
        if write.mustLead { leadAndWait(write) }
    }

    /// Leads the group that holds `own`, then waits for the sync that confirms it, if one comes.
    private func leadAndWait(_ own: PendingWrite) {
        if lead(own) { own.waitForTurn() }
    }

    /// Runs the queued writes' groups, `own`'s first. A caller's thread leads only the group that
    /// holds its own write: the next group goes to the next waiting caller, or to `leaderQueue` when
    /// that write has no thread waiting. `leaderQueue`'s thread leads every group while writes are
    /// queued, waiting callers' included: handing a group to its first caller's thread cost a
    /// wake-up in which the writer did nothing, for every claim and outcome of the pushers.
    /// - Returns: whether `own`'s group went to the syncer, which then finishes `own`'s turn once more.
    @discardableResult
    private func lead(_ own: PendingWrite?) -> Bool {
        var ownAwaitsSync = false
        while true {
            let group = queue.withLock { queue in
                let count = min(queue.waiting.count, Self.maxGroupSize)
                let group = Array(queue.waiting.prefix(count))
                queue.waiting.removeFirst(count)
                return group
            }
            let started = ContinuousClock.now
            var committed = false
            withConnection { connection in committed = Self.run(group, on: connection) }
            statistics.record(groupSize: group.count, transactionTime: ContinuousClock.now - started)
            let next = queue.withLock { queue -> PendingWrite? in
                guard let next = queue.waiting.first else {
                    queue.leaderActive = false
                    return nil
                }
                if next.waits && own != nil { next.mustLead = true }
                return next
            }
            if let syncer, committed {
                // The next group starts while the disk confirms this one.
                ownAwaitsSync = own != nil
                syncer.complete(group)
            } else {
                // One dispatch from the writer's thread, not one per write: the next group waits
                // for this thread, and the completions fan out from a completion thread.
                let completionQueue = completionQueue
                completionQueue.async {
                    for member in group where member !== own { member.finishTurn(completingOn: completionQueue) }
                }
            }
            guard let next else { return ownAwaitsSync }
            if own != nil {
                if next.waits { next.finishTurn() } else { leaderQueue.async { self.lead(nil) } }
                return ownAwaitsSync
            }
        }
    }

    /// One transaction for `group`: a savepoint per write, one COMMIT for all.
    /// - Returns: whether the COMMIT succeeded (every write of a failed one got its error).
    private static func run(_ group: [PendingWrite], on connection: SQLiteConnection) -> Bool {
        do {
            try connection.executeCached("BEGIN IMMEDIATE")
        } catch {
            for write in group { write.fail(error) }
            return false
        }
        for (index, write) in group.enumerated() {
            do {
                try connection.cached("SAVEPOINT grouped_write").run([])
                if write.run(connection) {
                    try connection.cached("RELEASE grouped_write").run([])
                } else if connection.isAutocommit {
                    // SQLite rolled the whole transaction back (disk full, I/O error): the writes
                    // before this one are gone too.
                    let error = write.failure ?? StorageError("the transaction was rolled back")
                    for earlier in group[..<index] { earlier.fail(error) }
                    for later in group[(index + 1)...] { later.fail(error) }
                    return false
                } else {
                    try connection.cached("ROLLBACK TO grouped_write").run([])
                    try connection.cached("RELEASE grouped_write").run([])
                }
            } catch {
                if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
                for other in group { other.fail(error) }
                return false
            }
        }
        do {
            try connection.executeCached("COMMIT")
            return true
        } catch {
            if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
            for write in group { write.fail(error) }
            return false
        }
    }
}

/// One caller's write waiting for its group: the work, its outcome, and how its caller learns it.
///
/// - Note: `@unchecked Sendable` is sound: the submitting thread blocks in `waitForTurn` (or runs the
///   group itself) while the leader touches `run`, `fail` and `failure`, and then the syncer `fail`;
///   the semaphore and the syncer's lock hand the object from one thread to the next and back, so no
///   two threads use it at once. A write with a completion is touched by the leader alone once
///   submitted, then by the syncer. `mustLead` is written under the queue's lock before the
///   semaphore is signalled, and read after the wait.
final class PendingWrite: @unchecked Sendable {
    /// The caller's body, returning what it threw. Dropped as soon as it ran or the write failed, so
    /// the leader never keeps a waiting caller's (non-escaping) closure past the caller's wait.
    private var body: ((SQLiteConnection) -> (any Error)?)?
    private let onFailure: (any Error) -> Void
    /// For a write whose caller does not wait: called once its transaction committed or failed.
    private let completion: (() -> Void)?
    private let turn = DispatchSemaphore(value: 0)
    private(set) var failure: (any Error)?
    var mustLead = false

    init(
        body: @escaping (SQLiteConnection) -> (any Error)?, onFailure: @escaping (any Error) -> Void,
        completion: (() -> Void)? = nil
    ) {
        self.body = body
        self.onFailure = onFailure
        self.completion = completion
    }

    /// Whether a thread waits in `waitForTurn` for this write.
    var waits: Bool { completion == nil }

    /// Runs the caller's body; false when it threw (its error is then in `failure`).
    func run(_ connection: SQLiteConnection) -> Bool {
        failure = body?(connection)
        body = nil
        return failure == nil
    }

    /// The write did not commit: its caller gets `error`.
    func fail(_ error: any Error) {
        body = nil
        failure = error
        onFailure(error)
    }

    func waitForTurn() { turn.wait() }

    /// The write's transaction is over (or, for a waiting caller, its turn to lead has come).
    func finishTurn() {
        if let completion { completion() } else { turn.signal() }
    }

    /// `finishTurn` for a write whose commit is over: a waiting caller is woken at once, a completion
    /// runs on `queue`, so that the thread ending a whole group's turns (the leader, the syncer) does
    /// not answer each request itself before it can go on.
    func finishTurn(completingOn queue: DispatchQueue) {
        if waits { finishTurn() } else { queue.async { self.finishTurn() } }
    }
}

/// How many writes each commit carried, read by the metrics.
public final class GroupCommitStatistics: Sendable {
    /// What the writer did since start.
    public struct Snapshot: Sendable {
        /// Transactions committed (or failed), each one disk sync.
        public var commits = 0
        /// The writes those transactions carried.
        public var writes = 0
        /// The most writes one transaction carried.
        public var largest = 0
        /// Time the writer connection spent in transactions, from BEGIN to the end of COMMIT.
        public var transactionSeconds: Double = 0
        /// Syncs of the WAL that confirmed commits (`synchronous=full`), each covering the commits
        /// that returned before it began.
        public var syncs = 0
        /// Time those syncs took: the disk's, spent beside the writer rather than in its transactions.
        public var syncSeconds: Double = 0
    }

    private let counts = Mutex(Snapshot())

    func record(groupSize: Int, transactionTime: Duration) {
        counts.withLock { counts in
            counts.commits += 1
            counts.writes += groupSize
            counts.largest = max(counts.largest, groupSize)
            counts.transactionSeconds += Self.seconds(transactionTime)
        }
    }

    func recordSync(_ duration: Duration) {
        counts.withLock { counts in
            counts.syncs += 1
            counts.syncSeconds += Self.seconds(duration)
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    public var snapshot: Snapshot { counts.withLock { $0 } }
}
