import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive lock on the data directory, held for the life of the process: two services on one
/// database would push from one outbox side by side, so a second start fails at once instead.
///
/// The lock is `flock(2)` on `deliveryd.lock` in the data directory: the kernel drops it when the
/// process dies, even by `kill -9`, so a crash never leaves a stale lock behind. The file says which
/// process holds it, for the message the second start prints.
final class DataDirectoryLock: Sendable {
    let path: String
    private let descriptor: Int32

    /// Why the lock could not be taken.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Takes the lock, or throws naming the process that holds it.
    init(dataDirectory: String) throws(Failure) {
        path = (dataDirectory as NSString).appendingPathComponent("deliveryd.lock")
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let lockErrno = errno
            var holder = [UInt8](repeating: 0, count: 256)
            let count = pread(fd, &holder, holder.count, 0)
            close(fd)
            guard lockErrno == EWOULDBLOCK else {
                throw Failure(description: "cannot lock \(path): \(String(cString: strerror(lockErrno)))")
            }
            let who = String(decoding: holder.prefix(max(0, count)), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(
                description:
                    "\(dataDirectory) is in use by another deliveryd (\(who.isEmpty ? "unknown process" : who)); "
                    + "one process per data directory")
        }
        let line = "pid \(getpid()) since \(Date().formatted(.iso8601))\n"
        _ = ftruncate(fd, 0)
        _ = line.withCString { pwrite(fd, $0, strlen($0), 0) }
        descriptor = fd
    }

    deinit { close(descriptor) }
}
