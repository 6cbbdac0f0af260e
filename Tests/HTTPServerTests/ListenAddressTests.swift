import HTTPServer
import Testing

@Suite("Listen address")
struct ListenAddressTests {
    /// `HOST:PORT` parsing accepts IPv4 addresses and rejects the rest.
    @Test func parsesListenAddress() {
        #expect(ListenAddress(parsing: "127.0.0.1:8080") == ListenAddress.loopback(port: 8080))
        #expect(ListenAddress(parsing: "0.0.0.0:0")?.port == 0)
        #expect(ListenAddress(parsing: "localhost:80") == nil)
        #expect(ListenAddress(parsing: "127.0.0.1:70000") == nil)
        #expect(ListenAddress(parsing: "127.0.0.1") == nil)
    }
}
