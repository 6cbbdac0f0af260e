internal import Synchronization

/// A value split into shards by a key's hash, each shard under its own lock, so that threads
/// working on different keys do not queue on one lock. On Linux a contended `Mutex` parks the
/// waiting thread in the kernel at once (a priority-inheritance futex, no spinning): a lock that
/// every request takes, however briefly, costs system calls and context switches as soon as two
/// threads meet on it.
final class ShardedMutex<Shard: Sendable>: Sendable {
    /// A `Mutex` is not copyable: each shard's lives in a box of its own.
    private final class Box: Sendable {
        let lock: Mutex<Shard>
        init(_ shard: Shard) { lock = Mutex(shard) }
    }

    private let boxes: [Box]

    init(shards: Int, _ makeShard: () -> Shard) {
        boxes = (0..<max(1, shards)).map { _ in Box(makeShard()) }
    }

    /// Runs `body` on the shard of `key`, under that shard's lock.
    func withLock<Result: Sendable, Failure: Error>(
        for key: some Hashable, _ body: (inout Shard) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        // The process's own hash is enough: shards live in memory only.
        try boxes[Int(UInt(bitPattern: key.hashValue) % UInt(boxes.count))].lock.withLock { (shard) throws(Failure) in
            try body(&shard)
        }
    }

    /// Runs `body` on every shard in turn, each under its lock (never two at once).
    func forEachShard(_ body: (inout Shard) -> Void) {
        for box in boxes { box.lock.withLock { body(&$0) } }
    }
}
