import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where log lines go: a bounded buffer that one owned thread writes out, a whole batch per `write(2)`.
///
/// Callers (event loops, handlers, push workers) never wait on the disk or on a slow pipe reader:
/// `submit` copies the bytes and returns. When the buffer is full the lines are dropped, counted in
/// `droppedLines` (exported as `deliveryd_log_lines_dropped_total`) and said in the log once the
/// writer catches up, never silently. `flush` waits until everything submitted so far is written,
/// for shutdown and for errors that must reach the log before the process may die.
///
/// The writer gathers lines for `gathering` after the first of a batch arrives (or until the buffer
/// is half full, or someone flushes): waking it for each submit cost a futex round trip per access
/// log hand-off and push batch, 2 % of the process's CPU under load.
///
/// - Note: `@unchecked Sendable`: every stored `var` is read and written only while `condition` is
///   locked; the writer thread and the callers meet only there.
public final class LogOutput: @unchecked Sendable {
    /// The process's standard error, shared by the application logger and the access log so that
    /// their lines interleave in the order they were submitted.
    public static let standardError: LogOutput = {
        let output = LogOutput(fileDescriptor: 2)
        // `exit()` from any path (a refused start, a finished command) still writes what was logged.
        atexit { LogOutput.standardError.flush() }
        return output
    }()

    /// Bytes waiting for the writer, at most.
    public let capacity: Int
    /// How long the writer lets lines gather before it writes them.
    public let gathering: Double

    private let destination: @Sendable ([UInt8]) -> Int
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var spare: [UInt8] = []
    private var submittedBytes: UInt64 = 0
    private var writtenBytes: UInt64 = 0
    private var dropped = 0
    private var unreported = 0
    private var writerStarted = false
    /// Callers waiting in `flush`: the writer then writes at once.
    private var flushing = 0

    /// Lines to a file descriptor (standard error, a file, a pipe). Writes retry `EINTR`, wait out
    /// `EAGAIN`; a batch the descriptor refuses (`EPIPE`, `ENOSPC`) counts as dropped.
    public convenience init(fileDescriptor: Int32, capacity: Int = 4 << 20, gathering: Double = 0.005) {
        self.init(capacity: capacity, gathering: gathering) { batch in Self.writeAll(batch, to: fileDescriptor) }
    }

    /// Lines to `destination`, called on the writer thread with a batch of whole lines; it returns
    /// how many of the batch's lines it could not keep.
    public init(
        capacity: Int = 4 << 20, gathering: Double = 0.005, destination: @escaping @Sendable ([UInt8]) -> Int
    ) {
        self.capacity = capacity
        self.gathering = gathering
        self.destination = destination
    }

    /// Queues whole lines (each ending in `\n`); `lines` is how many, for the drop count.
    /// - Returns: false when the buffer was full and the lines were dropped.
    @discardableResult
    public func submit(_ bytes: some Collection<UInt8>, lines: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard pending.count + bytes.count <= capacity else {
            dropped += lines
            unreported += lines
            return false
        }
        let wasEmpty = pending.isEmpty
        let wasBelowHalf = pending.count < capacity / 2
        pending.append(contentsOf: bytes)
        submittedBytes += UInt64(bytes.count)
        if !writerStarted {
            writerStarted = true
            let thread = Thread { [self] in drain() }
            thread.name = "log-writer"
            thread.start()
        } else if wasEmpty || (wasBelowHalf && pending.count >= capacity / 2) {
            // Broadcast: a caller waiting in `flush` shares the condition with the writer.
            condition.broadcast()
        }
        return true
    }

    /// Queues one line of text.
    @discardableResult
    public func submit(line: String) -> Bool { submit(line.utf8, lines: 1) }

    /// Waits until every line submitted before the call is written, or `timeout` passed (a reader
    /// that stopped reading must not hang a shutdown). - Returns: whether everything was written.
    @discardableResult
    public func flush(timeout: Double = 2) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        let target = submittedBytes
        guard writtenBytes < target else { return true }
        flushing += 1
        defer { flushing -= 1 }
        condition.broadcast()  // a gathering writer writes now
        while writtenBytes < target {
            if !condition.wait(until: deadline) { return writtenBytes >= target }
        }
        return true
    }

    /// Lines dropped since the start because the buffer was full or the destination refused them.
    public var droppedLines: Int {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }

    /// The writer thread: takes the whole buffer, writes it, reports drops, repeats.
    private func drain() {
        while true {
            condition.lock()
            while pending.isEmpty && unreported == 0 { condition.wait() }
            let gatheredBy = Date(timeIntervalSinceNow: gathering)
            while flushing == 0 && pending.count < capacity / 2 && condition.wait(until: gatheredBy) {}
            var batch = pending
            pending = spare
            pending.removeAll(keepingCapacity: true)
            let target = submittedBytes
            let unreportedLines = unreported
            unreported = 0
            condition.unlock()

            if unreportedLines > 0 { batch += Self.dropNotice(unreportedLines) }
            let refused = batch.isEmpty ? 0 : destination(batch)
            batch.removeAll(keepingCapacity: true)

            condition.lock()
            spare = batch
            writtenBytes = target
            dropped += refused
            condition.broadcast()
            condition.unlock()
        }
    }

    private static func dropNotice(_ lines: Int) -> [UInt8] {
        let line = Logger.line(
            time: Date(), level: .warning, label: "log", message: "log.lines_dropped",
            fields: [
                "log.dropped_lines": .int(lines),
                "note": "the log output did not keep up; the lines are counted in deliveryd_log_lines_dropped_total",
            ])
        return Array(line.utf8)
    }

    /// Writes all of `batch`; returns how many of its lines were lost to an error.
    static func writeAll(_ batch: [UInt8], to fd: Int32) -> Int {
        var offset = 0
        while offset < batch.count {
            let written = batch.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written >= 0 {
                offset += written
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN:
                var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&poller, 1, 1000)
            default:
                return batch[offset...].reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
            }
        }
        return 0
    }
}
