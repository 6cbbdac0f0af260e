import Pusher
import Testing

@Suite("libcurl")
struct CurlLibraryTests {
    /// The linked libcurl reports a version, TLS and HTTP/2, so the pusher can start.
    @Test func linkedLibcurlHasHTTP2() throws {
        let library = CurlLibrary.current
        #expect(library.version.first?.isNumber == true)
        #expect(library.supportsHTTP2)
        #expect(library.nghttp2Version != nil)
        #expect(library.sslVersion.contains("OpenSSL"))
        try library.requireHTTP2()
    }
}
