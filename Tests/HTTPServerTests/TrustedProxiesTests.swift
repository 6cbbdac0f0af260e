import Glibc
import Testing

@testable import HTTPServer

@Suite("Trusted proxies")
struct TrustedProxiesTests {
    static func peer(_ text: String) -> UInt32 {
        var address = in_addr()
        inet_pton(AF_INET, text, &address)
        return address.s_addr
    }

    static let proxies = TrustedProxies(["10.0.0.0/8", "192.0.2.7"].compactMap(IPv4Network.init(parsing:)))

    /// Networks parse with or without a length; nonsense does not.
    @Test func networksParse() {
        #expect(IPv4Network(parsing: "10.1.2.3/8")?.description == "10.0.0.0/8")
        #expect(IPv4Network(parsing: "192.0.2.7")?.description == "192.0.2.7/32")
        #expect(IPv4Network(parsing: "0.0.0.0/0")?.contains(networkOrder: Self.peer("8.8.8.8")) == true)
        for bad in ["", "10.0.0.0/33", "10.0.0/8", "example.com", "10.0.0.0/", "::1", "10.0.0.0/8/8"] {
            #expect(IPv4Network(parsing: bad) == nil, "\(bad)")
        }
    }

    /// From a peer that is not a proxy the headers are the client's own words: ignored.
    @Test func anUntrustedPeerIsTheClient() {
        let headers = [(name: "X-Forwarded-For", value: "203.0.113.9"), (name: "Forwarded", value: "for=203.0.113.8")]
        #expect(Self.proxies.clientAddress(peer: Self.peer("198.51.100.1"), headers: headers) == "198.51.100.1")
        #expect(TrustedProxies().clientAddress(peer: Self.peer("10.0.0.1"), headers: headers) == "10.0.0.1")
    }

    /// From a proxy: the rightmost address that is not a proxy; what the client wrote left of it is
    /// ignored; `Forwarded` wins over `X-Forwarded-For`; garbage makes the peer the client.
    @Test(arguments: [
        ([("X-Forwarded-For", "203.0.113.9")], "203.0.113.9"),
        ([("X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.1.1.1")], "203.0.113.9"),
        ([("x-forwarded-for", "6.6.6.6"), ("X-Forwarded-For", "203.0.113.9, 192.0.2.7")], "203.0.113.9"),
        ([("Forwarded", #"for=6.6.6.6, for="[2001:db8::1]:4711";proto=https"#)], "2001:db8::1"),
        ([("Forwarded", "for=203.0.113.9:1234"), ("X-Forwarded-For", "6.6.6.6")], "203.0.113.9"),
        ([("X-Forwarded-For", "10.2.2.2")], "10.0.0.1"),
        ([("X-Forwarded-For", "203.0.113.9, not-an-address")], "10.0.0.1"),
        ([], "10.0.0.1"),
    ])
    func aTrustedPeerForwardsTheClient(headers: [(String, String)], expected: String) {
        let named = headers.map { (name: $0.0, value: $0.1) }
        #expect(Self.proxies.clientAddress(peer: Self.peer("10.0.0.1"), headers: named) == expected)
    }
}
