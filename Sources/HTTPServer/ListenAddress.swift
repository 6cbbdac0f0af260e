#if canImport(Glibc)
    internal import Glibc
#endif

/// An IPv4 host and port to listen on, parsed from `HOST:PORT`.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let port: UInt16

    /// `127.0.0.1:port`: this machine only, the default (port 0: any free port, as tests use).
    public static func loopback(port: UInt16) -> ListenAddress { ListenAddress(host: "127.0.0.1", port: port) }

    public var description: String { "\(host):\(port)" }
}

extension ListenAddress {
    /// Parses `127.0.0.1:8080`; `nil` when the host is not a dotted IPv4 address or the port is not 0…65535.
    public init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        let host = String(text[..<colon])
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return nil }
        self.init(host: host, port: port)
    }
}
