package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Executables this package builds, found beside the running test bundle.
package enum BuiltProduct {
    /// The path of executable `name` in the build folder (`.build/<triple>/debug/`).
    package static func url(_ name: String) -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !directory.path.hasSuffix("/debug") && !directory.path.hasSuffix("/release") && directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent(name)
    }
}

/// A blocking TCP socket connected to `127.0.0.1:port`, or `nil` when nothing accepts there.
///
/// - Parameters:
///   - receiveTimeout: seconds a `recv` may wait before it fails.
///   - source: the client's own address, any of 127.0.0.0/8 (default: the kernel's choice,
///     127.0.0.1): how a test plays several clients.
package func connectLoopback(port: UInt16, receiveTimeout: Int = 5, source: String? = nil) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    if let source {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            return nil
        }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// `value` as `adjust` leaves it: settings are built from their defaults by naming only what a test
/// changes, `modified(PusherConfiguration()) { $0.lease = 2 }`.
package func modified<Value>(_ value: Value, _ adjust: (inout Value) -> Void) -> Value {
    var value = value
    adjust(&value)
    return value
}
