import HTTPServer
import Testing

@Suite("Basic listener over real sockets")
struct BasicHTTPListenerTests {
    static func echoListener() throws -> BasicHTTPListener {
        let listener = try BasicHTTPListener(address: ListenAddress(host: "127.0.0.1", port: 0)) { request in
            HTTPResponse(
                status: 200, headers: [("Content-Type", "text/plain")],
                body: Array("\(request.method) \(request.path) q=\(request.query ?? "-") \(request.body.count)".utf8)
            )
        }
        listener.start()
        return listener
    }

    /// A request is parsed (method, path, query, body) and the response is framed with Content-Length.
    @Test func servesRequest() throws {
        let listener = try Self.echoListener()
        defer { listener.stop() }
        let response = try TestClient.exchange(
            port: listener.boundAddress.port,
            "POST /v1/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
        )
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(response.contains("Content-Length: 18\r\n"))
        #expect(response.contains("Connection: close\r\n"))
        #expect(response.hasSuffix("\r\n\r\nPOST /v1/x q=y=1 5"))
    }

    /// Oversized headers get 431, oversized bodies 413, garbage 400; the listener keeps serving.
    @Test func refusesBadRequests() throws {
        let listener = try Self.echoListener()
        defer { listener.stop() }
        let port = listener.boundAddress.port
        let huge = String(repeating: "a", count: BasicHTTPListener.maxHeaderBytes + 10)
        #expect(try TestClient.exchange(port: port, "GET / HTTP/1.1\r\nX: \(huge)\r\n\r\n").hasPrefix("HTTP/1.1 431 "))
        #expect(
            try TestClient.exchange(port: port, "POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")
                .hasPrefix("HTTP/1.1 413 ")
        )
        #expect(try TestClient.exchange(port: port, "NONSENSE\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        #expect(try TestClient.exchange(port: port, "GET /ok HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
    }

    /// `HOST:PORT` parsing accepts IPv4 addresses and rejects the rest.
    @Test func parsesListenAddress() {
        #expect(ListenAddress(parsing: "127.0.0.1:8080") == ListenAddress(host: "127.0.0.1", port: 8080))
        #expect(ListenAddress(parsing: "0.0.0.0:0")?.port == 0)
        #expect(ListenAddress(parsing: "localhost:80") == nil)
        #expect(ListenAddress(parsing: "127.0.0.1:70000") == nil)
        #expect(ListenAddress(parsing: "127.0.0.1") == nil)
    }
}
