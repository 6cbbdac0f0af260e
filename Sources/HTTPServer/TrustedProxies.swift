#if canImport(Glibc)
    internal import Glibc
#endif

/// An IPv4 network such as `10.0.0.0/8`, or one address.
public struct IPv4Network: Sendable, Hashable, CustomStringConvertible {
    /// The network's address, host byte order, with the host bits cleared.
    let base: UInt32
    let prefixLength: Int

    /// Parses `10.0.0.0/8` or `192.0.2.7` (a `/32`); `nil` for anything else.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = Self.hostOrder(String(parts[0])) else { return nil }
        let length = parts.count == 2 ? Int(parts[1]) : 32
        guard let length, (0...32).contains(length) else { return nil }
        prefixLength = length
        base = address & Self.mask(length)
    }

    /// Whether `address` (network byte order, as a socket gives it) is inside.
    public func contains(networkOrder address: UInt32) -> Bool {
        UInt32(bigEndian: address) & Self.mask(prefixLength) == base
    }

    func contains(text: String) -> Bool {
        Self.hostOrder(text).map { $0 & Self.mask(prefixLength) == base } ?? false
    }

    public var description: String {
        let bytes = [24, 16, 8, 0].map { String((base >> UInt32($0)) & 0xFF) }
        return bytes.joined(separator: ".") + "/\(prefixLength)"
    }

    private static func mask(_ length: Int) -> UInt32 {
        length == 0 ? 0 : UInt32.max << UInt32(32 - length)
    }

    /// A dotted IPv4 address in host byte order.
    static func hostOrder(_ text: String) -> UInt32? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return UInt32(bigEndian: address.s_addr)
    }
}

/// Who a request comes from when a load balancer or proxy connects for its clients.
///
/// Only a peer in the configured networks is believed: from anyone else, `Forwarded` and
/// `X-Forwarded-For` are whatever the client wrote, and the peer's own address is the client's.
/// From a trusted peer the client is the rightmost address the headers name that is not itself a
/// trusted proxy (the proxies append what they saw; entries left of it are the client's to forge).
public struct TrustedProxies: Sendable, Hashable {
    public let networks: [IPv4Network]

    public init(_ networks: [IPv4Network] = []) {
        self.networks = networks
    }

    /// Whether `peer` (network byte order) is one of the proxies.
    public func contains(networkOrder peer: UInt32) -> Bool {
        networks.contains { $0.contains(networkOrder: peer) }
    }

    /// The client's address as text: the peer's, or the one a trusted proxy forwarded.
    func clientAddress(peer: UInt32, headers: [(name: String, value: String)]) -> String {
        let peerText = Posix.ipv4Text(peer)
        guard !networks.isEmpty, contains(networkOrder: peer) else { return peerText }
        var forwarded: [String] = []
        var usedForwarded = false
        for header in headers where HTTPRequestParser.equalsIgnoringCase(header.name, "forwarded") {
            usedForwarded = true
            for element in header.value.split(separator: ",") {
                for pair in element.split(separator: ";") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2, parts[0].trimmingWhitespace().lowercased() == "for" else { continue }
                    forwarded.append(Self.node(String(parts[1].trimmingWhitespace())))
                }
            }
        }
        if !usedForwarded {
            for header in headers where HTTPRequestParser.equalsIgnoringCase(header.name, "x-forwarded-for") {
                forwarded += header.value.split(separator: ",").map { String($0.trimmingWhitespace()) }
            }
        }
        for candidate in forwarded.reversed() {
            guard Self.isAddress(candidate) else { return peerText }  // garbled by someone: trust nothing
            if !networks.contains(where: { $0.contains(text: candidate) }) { return candidate }
        }
        return peerText
    }

    /// The address of a `Forwarded` node: quotes, an IPv6 address's brackets and a port removed.
    private static func node(_ value: String) -> String {
        var node = Substring(value)
        if node.hasPrefix("\""), node.hasSuffix("\""), node.count >= 2 { node = node.dropFirst().dropLast() }
        if node.hasPrefix("["), let close = node.firstIndex(of: "]") {
            return String(node[node.index(after: node.startIndex)..<close])
        }
        if let colon = node.firstIndex(of: ":"), node.lastIndex(of: ":") == colon { node = node[..<colon] }
        return String(node)
    }

    private static func isAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
