internal import CLinuxShim

#if canImport(Glibc)
    internal import Glibc
#endif

/// The socket calls of the server, each through one errno funnel: `EINTR` is retried, `EAGAIN`
/// becomes `nil` (would block), anything else is a thrown `SystemError`. `EBADF` and `EFAULT` can only
/// mean a bug of ours, so they trap.
enum Posix {
    @inline(__always)
    static func call(_ function: String, _ body: () -> Int) throws(SystemError) -> Int? {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN: return nil
            case EBADF, EFAULT: preconditionFailure("\(function) failed with errno \(code): a descriptor or buffer bug")
            default: throw SystemError(function: function, errno: code)
            }
        }
    }

    static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try call("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try call("send") { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads or writes an eventfd's counter; `nil` when it would block (nothing to read, or full).
    static func readEventCounter(_ fd: Int32) -> UInt64? {
        var value: UInt64 = 0
        let result = try? call("read eventfd") { Glibc.read(fd, &value, 8) }
        return result.flatMap { $0 == 8 ? value : nil }
    }

    static func addToEventCounter(_ fd: Int32) {
        var one: UInt64 = 1
        // EAGAIN means the counter is already non-zero enough to wake the loop; nothing else can fail.
        _ = try? call("write eventfd") { Glibc.write(fd, &one, 8) }
    }

    /// Registers, changes or removes `fd` in an epoll set. Only resource exhaustion (`ENOMEM`,
    /// `ENOSPC`: the user's watch limit) is thrown; any other failure is a bookkeeping bug and traps.
    static func epollControl(_ epollFD: Int32, _ operation: Int32, _ fd: Int32, events: UInt32) throws(SystemError) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        let result = epoll_ctl(epollFD, operation, fd, &event)
        guard result != 0 else { return }
        let code = errno
        switch code {
        case ENOMEM, ENOSPC: throw SystemError(function: "epoll_ctl", errno: code)
        default: preconditionFailure("epoll_ctl(\(operation)) on \(fd) failed with errno \(code): a bookkeeping bug")
        }
    }

    /// Waits for events; an interrupted wait reports none. Any other failure is a bug and traps.
    static func epollWait(_ epollFD: Int32, _ events: inout [epoll_event], timeoutMilliseconds: Int32) -> Int {
        let count = epoll_wait(epollFD, &events, Int32(events.count), timeoutMilliseconds)
        if count >= 0 { return Int(count) }
        let code = errno
        guard code == EINTR else { preconditionFailure("epoll_wait failed with errno \(code)") }
        return 0
    }

    /// Turns off Nagle's algorithm: a response goes out as soon as it is written. False when the
    /// peer is already gone (the socket then fails its first read).
    static func setNoDelay(_ fd: Int32) -> Bool {
        var one: Int32 = 1
        if setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 {
            return true
        }
        let code = errno
        precondition(code != EBADF && code != EFAULT && code != ENOTSOCK, "setsockopt failed with errno \(code)")
        return false
    }

    /// Half-closes a connection's sending side, then reads and discards what the client still sends
    /// (up to `limit` bytes, without waiting), so that closing does not reset a response in flight.
    static func shutdownWriteAndDrain(_ fd: Int32, limit: Int = 64 * 1024) {
        if shutdown(fd, Int32(SHUT_WR)) != 0 {
            let code = errno
            // ENOTCONN: the peer has already gone, which is fine.
            precondition(code == ENOTCONN, "shutdown failed with errno \(code)")
        }
        var scratch = [UInt8](repeating: 0, count: 4096)
        var drained = 0
        while drained < limit {
            let count = try? scratch.withUnsafeMutableBytes { buffer throws(SystemError) in
                try call("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT)) }
            }
            guard let count, count > 0 else { return }  // nothing more, reset, or closed
            drained += count
        }
    }

    /// A new connection and its peer's IPv4 address (network byte order), `nil` when none is waiting.
    static func accept(_ fd: Int32) throws(SystemError) -> (fd: Int32, peer: UInt32)? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let accepted = try withUnsafeMutablePointer(to: &address) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw throws(SystemError) in
                try call("accept4") {
                    Int(clinux_accept4(fd, raw, &length, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)))
                }
            }
        }
        return accepted.map { (Int32($0), address.sin_addr.s_addr) }
    }

    /// Dotted IPv4 text of an address in network byte order.
    static func ipv4Text(_ address: UInt32) -> String {
        let bytes = withUnsafeBytes(of: address) { Array($0) }
        return "\(bytes[0]).\(bytes[1]).\(bytes[2]).\(bytes[3])"
    }

    /// Closes a descriptor; never retried (on Linux the descriptor is gone even after `EINTR`).
    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Throws `EADDRINUSE` if another socket listens on `address`, even one with `SO_REUSEPORT`:
    /// our listeners share their port with `SO_REUSEPORT`, which would otherwise let a second
    /// process bind the same port without a word and take half of its connections.
    static func requireFreeAddress(_ address: ListenAddress) throws(SystemError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(function: "socket", errno: errno) }
        defer { close(fd) }
        // Without SO_REUSEPORT: the bind fails while anyone listens there (TIME_WAIT aside).
        guard bind(fd, to: address, reusingPort: false) == 0 else {
            throw SystemError(function: "bind \(address)", errno: errno)
        }
    }

    /// A non-blocking TCP listener bound to `address`, with `SO_REUSEPORT` so each loop can have its own.
    static func listener(_ address: ListenAddress, backlog: Int32) throws(SystemError) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(function: "socket", errno: errno) }
        let bound = bind(fd, to: address, reusingPort: true)
        guard bound == 0, listen(fd, backlog) == 0 else {
            let error = SystemError(function: bound == 0 ? "listen" : "bind", errno: errno)
            close(fd)
            throw error
        }
        return fd
    }

    /// Binds `fd` to an IPv4 `address` with `SO_REUSEADDR` (and `SO_REUSEPORT` when asked); 0 or -1 as `bind`.
    private static func bind(_ fd: Int32, to address: ListenAddress, reusingPort: Bool) -> Int32 {
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusingPort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = address.port.bigEndian
        inet_pton(AF_INET, address.host, &socketAddress.sin_addr)
        return withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }

    static func localPort(_ fd: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Raises the soft open-file limit towards `wanted` (bounded by the hard limit); returns the soft
    /// limit in force afterwards, read back (a refused raise leaves the old one), or 0 if unreadable.
    static func raiseOpenFileLimit(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        let target = min(rlim_t(max(0, wanted)), limit.rlim_max)
        if limit.rlim_cur < target {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
