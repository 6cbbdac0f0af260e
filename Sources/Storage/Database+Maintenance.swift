public import FoundationEssentials

#if canImport(Glibc)
    internal import Glibc
#endif

extension Database {
    /// Deletes what the retention policy no longer keeps, in one transaction.
    @discardableResult
    public func prune(now: Date, policy: RetentionPolicy = RetentionPolicy()) throws(StorageError) -> PruneReport {
        try writeConnection { connection in
            func cutoff(_ age: TimeInterval) -> SQLiteValue {
                .integer(now.addingTimeInterval(-age).storageMilliseconds)
            }
            var report = PruneReport()
            try connection.cached("DELETE FROM activities WHERE ended_at IS NOT NULL AND ended_at < ?")
                .run([cutoff(policy.endedActivities)])
            report.activities = connection.changes
            try connection.cached("DELETE FROM push_log WHERE attempted_at < ?").run([cutoff(policy.pushLog)])
            report.pushLog = connection.changes
            try connection.cached("DELETE FROM outbox WHERE state IN ('sent', 'superseded') AND updated_at < ?")
                .run([cutoff(policy.finishedOutboxRows)])
            report.outbox = connection.changes
            try connection.cached("DELETE FROM outbox WHERE state = 'dead' AND updated_at < ?").run([
                cutoff(policy.deadLetters)
            ])
            report.outbox += connection.changes
            try connection.cached("DELETE FROM idempotency_keys WHERE expires_at < ?").run([cutoff(0)])
            report.idempotencyKeys = connection.changes
            return report
        }
    }

    /// Writes a consistent copy of the live database to `path` (`VACUUM INTO`), while it keeps serving.
    /// - Throws: `StorageError` if `path` exists already or cannot be written.
    public func backup(to path: String) throws(StorageError) {
        // Created empty with mode 0600 first (`VACUUM INTO` fills an empty file): a backup holds
        // what the database holds. `O_EXCL`: a backup never overwrites a file.
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StorageError(
                errno == EEXIST
                    ? "\(path) exists already; a backup never overwrites a file"
                    : "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        Glibc.close(fd)
        do {
            try read(inTransaction: false) { connection in
                try connection.cached("VACUUM INTO ?").run([.text(path)])
            }
        } catch {
            unlink(path)  // no half backup left to be mistaken for one
            throw error
        }
    }

    /// Runs SQLite's own consistency check; returns `ok` or the problems it found.
    public func integrityCheck() throws(StorageError) -> String {
        try read { connection in
            try connection.cached("PRAGMA integrity_check").rows([]) { $0.text(0) ?? "" }.joined(separator: "\n")
        }
    }
}
