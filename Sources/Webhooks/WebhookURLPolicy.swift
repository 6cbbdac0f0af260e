import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// Where webhooks may go. By default only `https`, and never into the operator's own network: a
/// merchant must not be able to make deliveryd post to its database, its metadata service or its
/// loopback. The address rule is checked where the connection is made, on the address actually
/// connected to (so a name that resolves to a private address, or changes to one, is refused), and
/// redirects are never followed.
public struct WebhookURLPolicy: Sendable, Hashable {
    /// Allows `http` URLs (tests, one machine behind its own proxy).
    public var allowsHTTP: Bool
    /// Allows private, loopback and link-local addresses (tests, one machine).
    public var allowsPrivateNetworks: Bool

    public init(allowsHTTP: Bool = false, allowsPrivateNetworks: Bool = false) {
        self.allowsHTTP = allowsHTTP
        self.allowsPrivateNetworks = allowsPrivateNetworks
    }

    /// Why `url` cannot be an endpoint, or `nil` when it can (its name is checked again at each connection).
    public func problem(with url: String) -> String? {
        guard url.utf8.count <= 2_000 else { return "must be at most 2000 characters" }
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased() else {
            return "must be an absolute URL"
        }
        guard scheme == "https" || (scheme == "http" && allowsHTTP) else {
            return allowsHTTP ? "must be an http or https URL" : "must be an https URL"
        }
        guard let host = parsed.host(percentEncoded: false), !host.isEmpty else { return "must name a host" }
        guard parsed.user == nil, parsed.password == nil else {
            return "must not carry credentials (they would be kept and logged with the URL)"
        }
        guard parsed.fragment == nil else { return "must not have a fragment" }
        if let refusal = refusal(ofLiteralHost: host) { return refusal }
        return nil
    }

    /// Why a connection to this IPv4 address (4 bytes) or IPv6 address (16 bytes) is refused.
    public func refusal(ofAddress bytes: [UInt8]) -> String? {
        guard !allowsPrivateNetworks, let range = Self.reservedRange(of: bytes) else { return nil }
        return "\(Self.text(of: bytes)) is \(range), which webhooks may not reach"
    }

    private func refusal(ofLiteralHost host: String) -> String? {
        var bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        // `localhost.` is `localhost`: a fully qualified name's final dot changes nothing.
        if bare.hasSuffix(".") { bare.removeLast() }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 {
            return refusal(ofAddress: withUnsafeBytes(of: &v4) { Array($0) })
        }
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            return refusal(ofAddress: withUnsafeBytes(of: &v6) { Array($0) })
        }
        if !allowsPrivateNetworks, bare.lowercased() == "localhost" || bare.lowercased().hasSuffix(".localhost") {
            return "\(bare) is the loopback, which webhooks may not reach"
        }
        return nil
    }

    /// The name of the reserved range an address falls in, `nil` for a public address.
    static func reservedRange(of bytes: [UInt8]) -> String? {
        if bytes.count == 4 { return reservedIPv4(bytes[0], bytes[1], bytes[2], bytes[3]) }
        guard bytes.count == 16 else { return "not an IP address" }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return bytes[15] == 1 ? "the loopback" : "unspecified" }
        // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) addresses reach an IPv4 address.
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff
            || bytes[0..<12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]
        {
            return reservedIPv4(bytes[12], bytes[13], bytes[14], bytes[15])
        }
        if bytes[0] & 0xfe == 0xfc { return "a unique local (private) address" }
        if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { return "link-local" }
        if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0xc0 { return "site-local" }
        if bytes[0] == 0xff { return "multicast" }
        if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0d && bytes[3] == 0xb8 { return "documentation" }
        return nil
    }

    private static func reservedIPv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> String? {
        switch (a, b) {
        case (0, _): "this network"
        case (10, _): "private"
        case (100, 64...127): "shared address space (carrier NAT)"
        case (127, _): "the loopback"
        case (169, 254): "link-local (cloud metadata lives here)"
        case (172, 16...31): "private"
        case (192, 168): "private"
        case (192, 0) where c == 0: "IETF protocol assignments"
        case (198, 18...19): "benchmarking"
        case (224...239, _): "multicast"
        case (240...255, _): "reserved"
        default: nil
        }
    }

    static func text(of bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
