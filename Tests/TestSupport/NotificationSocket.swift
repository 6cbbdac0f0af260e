import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Stands in for systemd's notification socket: an `AF_UNIX` datagram socket bound to a path in a
/// new temporary directory, or to an abstract name (`@…`), whose messages a test reads.
package final class NotificationSocket {
    /// What `NOTIFY_SOCKET` names: the path, or `@` and the abstract name.
    package let name: String
    private let descriptor: Int32
    private let directory: String?

    /// - Parameter abstract: bind to an abstract name rather than a path.
    package init(abstract: Bool = false) throws {
        let unique = UUID().uuidString.prefix(8)
        if abstract {
            directory = nil
            name = "@deliveryd-test-\(unique)"
        } else {
            let folder = NSTemporaryDirectory() + "notify-\(unique)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            directory = folder
            name = folder + "/notify"
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        if abstract { bytes[0] = 0 } else { bytes.append(0) }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard descriptor >= 0, bound == 0 else {
            throw BindFailure(description: "cannot bind the notification socket \(name): errno \(errno)")
        }
    }

    package struct BindFailure: Error, CustomStringConvertible {
        package let description: String
    }

    deinit {
        close(descriptor)
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// The next message, or `nil` when none comes within `timeout` seconds (a bound on a wait for a
    /// message that is due, not a measure).
    package func receive(timeout: Int32 = 60) -> String? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeout * 1000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
