#if canImport(Glibc)
    import Glibc
#endif

/// Tells systemd how the service is doing, for a unit of `Type=notify`: `READY=1` once it serves
/// (systemd holds back units ordered after it until then, and `systemctl start` returns then),
/// `STOPPING=1` when a graceful stop begins.
///
/// The protocol (sd_notify(3)) is one datagram per message to the `AF_UNIX` socket that
/// `NOTIFY_SOCKET` names: a path, or an abstract name written with a leading `@`. Without the
/// variable (not started by systemd) every message is dropped, so callers need not check.
public struct SystemdNotifier: Sendable {
    /// The socket's address as `NOTIFY_SOCKET` gave it; `nil` when there is none.
    public let socketName: String?

    /// - Parameter socketName: the socket's address; empty or `nil` drops every message.
    public init(socketName: String?) {
        self.socketName = socketName.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The notifier systemd asked for through this process's environment.
    public static func fromEnvironment() -> SystemdNotifier {
        SystemdNotifier(socketName: getenv("NOTIFY_SOCKET").map { String(cString: $0) })
    }

    /// Why a message did not reach systemd.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Sends `state` (newline-separated `KEY=value` assignments); does nothing without a socket.
    /// - Throws: `Failure` when the socket name is unusable or the datagram cannot be sent.
    public func notify(_ state: String) throws(Failure) {
        guard let socketName else { return }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // An abstract name starts with a zero byte instead of the `@`; a path ends with one.
        var name = Array(socketName.utf8)
        let isAbstract = name.first == UInt8(ascii: "@")
        if isAbstract { name[0] = 0 } else { name.append(0) }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard name.count <= capacity, isAbstract || name.first == UInt8(ascii: "/") else {
            throw Failure(description: "NOTIFY_SOCKET \(socketName) is neither an absolute path nor an @name that fits")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path.copyBytes(from: name)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
        guard sent == bytes.count else {
            throw Failure(description: "sending to NOTIFY_SOCKET \(socketName): \(String(cString: strerror(errno)))")
        }
    }
}
