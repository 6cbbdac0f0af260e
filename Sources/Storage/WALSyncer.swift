internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Makes committed writes durable off the writer's thread, before anyone is told they are stored.
///
/// With `synchronous=FULL`, SQLite syncs the WAL inside every COMMIT, so the one writer connection
/// sat idle for the disk (3.4 ms a commit here) while the next group of writes waited for it. Its
/// documented equivalent is `synchronous=NORMAL` plus one sync of the WAL file after each commit:
/// the writer commits at NORMAL and goes on with the next group, while this thread syncs the WAL and
/// only then completes the writes of every commit that returned before the sync began. One sync
/// covers all of them, because a sync flushes everything written to the file before it. Checkpoints
/// keep NORMAL's own syncs (the WAL before a checkpoint, the database after, the WAL header when the
/// file is reused), which FULL does not change.
///
/// What differs from FULL: a reader may see a commit up to one sync before its writer is answered.
/// Nothing that acts on the data does: the pushers' and the webhook dispatcher's claims are writes,
/// answered after a sync that covers every commit before them.
///
/// A failed sync is final: after an `fsync` error the kernel may have dropped the dirty pages and a
/// later sync can succeed without them, so every later write is refused until deliveryd restarts.
final class WALSyncer: Sendable {
    private struct Pending {
        var groups: [[PendingWrite]] = []
        var draining = false
    }

    /// The open WAL file, touched only by the sync queue's one running block.
    private struct WALFile {
        var descriptor: Int32 = -1
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var failure: StorageError?
    }

    private let walPath: String
    private let databasePath: String
    private let directoryPath: String
    private let pending = Mutex(Pending())
    private let file = Mutex(WALFile())
    private let syncQueue = DispatchQueue(label: "deliveryd.storage.wal-sync")
    private let completionQueue: DispatchQueue
    private let statistics: GroupCommitStatistics

    init(databasePath: String, completionQueue: DispatchQueue, statistics: GroupCommitStatistics) {
        self.databasePath = databasePath
        self.walPath = databasePath + "-wal"
        self.directoryPath = (databasePath as NSString).deletingLastPathComponent
        self.completionQueue = completionQueue
        self.statistics = statistics
    }

    deinit {
        let descriptor = file.withLock { $0.descriptor }
        if descriptor >= 0 { close(descriptor) }
    }

    /// Completes `group`, whose transaction committed, once a sync that began after the commit ended.
    func complete(_ group: [PendingWrite]) {
        let starts = pending.withLock { pending in
            pending.groups.append(group)
            if pending.draining { return false }
            pending.draining = true
            return true
        }
        if starts { syncQueue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let groups = pending.withLock { pending -> [[PendingWrite]] in
                let groups = pending.groups
                pending.groups = []
                if groups.isEmpty { pending.draining = false }
                return groups
            }
            if groups.isEmpty { return }
            let started = ContinuousClock.now
            let failure = sync()
            statistics.recordSync(ContinuousClock.now - started)
            for group in groups {
                for write in group {
                    if let failure { write.fail(failure) }
                    write.finishTurn(completingOn: completionQueue)
                }
            }
        }
    }

    /// Syncs the WAL file the writer appends to; the error that makes the writes unsafe, if any.
    private func sync() -> StorageError? {
        file.withLock { file -> StorageError? in
            if let failure = file.failure { return failure }
            do throws(StorageError) {
                try syncCurrentWAL(&file)
                return nil
            } catch {
                file.failure = error
                return error
            }
        }
    }

    private func syncCurrentWAL(_ file: inout WALFile) throws(StorageError) {
        var status = stat()
        guard stat(walPath, &status) == 0 else {
            // No WAL: the last connection closed and checkpointed it into the database file, which
            // then holds every commit.
            guard errno == ENOENT else { throw failure("cannot find", walPath) }
            try Self.syncFile(at: databasePath)
            return
        }
        if file.descriptor < 0 || UInt64(status.st_dev) != file.device || UInt64(status.st_ino) != file.inode {
            // First sync, or SQLite made a new WAL file: its name must be durable too.
            if file.descriptor >= 0 { close(file.descriptor) }
            file.descriptor = open(walPath, O_RDONLY | O_CLOEXEC)
            guard file.descriptor >= 0 else { throw failure("cannot open", walPath) }
            file.device = UInt64(status.st_dev)
            file.inode = UInt64(status.st_ino)
            try Self.syncFile(at: directoryPath)
        }
        guard fdatasync(file.descriptor) == 0 else { throw failure("cannot sync", walPath) }
    }

    private static func syncFile(at path: String) throws(StorageError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open", path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync", path) }
    }

    private func failure(_ what: String, _ path: String) -> StorageError {
        Self.failure(what, path)
    }

    private static func failure(_ what: String, _ path: String) -> StorageError {
        let number = errno
        let reason = String(cString: strerror(number))
        return StorageError(
            .io, "\(what) \(path) (\(reason)): writes are no longer confirmed on disk; check the disk and restart",
            underlying: "errno \(number)")
    }
}
