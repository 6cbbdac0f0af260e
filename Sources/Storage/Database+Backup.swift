internal import FoundationEssentials

#if canImport(Glibc)
    internal import Glibc
#endif

extension Database {
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
        try readSession { connection in
            try connection.cached("PRAGMA integrity_check").rows([]) { try $0.text("integrity_check") }
                .joined(separator: "\n")
        }
    }
}
