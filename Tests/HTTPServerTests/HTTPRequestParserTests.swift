import Testing

@testable import HTTPServer

/// Feeds `bytes` in pieces of `split` bytes (0 = all at once) and collects what the parser produced.
func parse(_ text: String, split: Int, limits: HTTPLimits = HTTPLimits()) -> (
    requests: [HTTPRequest], error: HTTPParseError?
) {
    var parser = HTTPRequestParser(limits: limits)
    let bytes = Array(text.utf8)
    var requests: [HTTPRequest] = []
    let step = split == 0 ? max(1, bytes.count) : split
    var offset = 0
    while offset < bytes.count {
        parser.append(Array(bytes[offset..<min(bytes.count, offset + step)]))
        offset += step
        do {
            loop: while true {
                switch try parser.next() {
                case .request(let request): requests.append(request)
                case .expectsContinue: continue
                case .needMore: break loop
                }
            }
        } catch {
            return (requests, error)
        }
    }
    return (requests, nil)
}

@Suite("HTTP/1.1 request parser")
struct HTTPRequestParserTests {
    static let pipeline =
        "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
        + "POST /v1/orders/o-1/status?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello"
        + "PUT /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n"
        + "GET /close HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n"
        + "GET /old HTTP/1.0\r\n\r\n"

    /// The same bytes give the same five requests whether they arrive at once, in odd splits or one byte at a time.
    @Test(arguments: [0, 1, 2, 3, 7, 13, 64])
    func dripFeedGivesSameRequests(split: Int) throws {
        let (requests, error) = parse(Self.pipeline, split: split)
        #expect(error == nil)
        try #require(requests.count == 5)
        #expect(requests.map(\.method) == ["GET", "POST", "PUT", "GET", "GET"])
        #expect(requests.map(\.path) == ["/healthz", "/v1/orders/o-1/status", "/c", "/close", "/old"])
        #expect(requests[1].query == "x=1")
        #expect(requests[1].body == Array("hello".utf8))
        #expect(requests[1].header("content-type") == "application/json")
        #expect(requests[2].body == Array("abc0123456789abcdef".utf8))
        #expect(requests.map(\.keepAlive) == [true, true, true, false, false])
        #expect(requests[4].version == .http10)
    }

    /// Every malformed or ambiguous request is refused with its status, in any split.
    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n folded\r\n\r\n", 400),
        ("GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n", 413),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n", 413),
        // A chunk size near Int.max after a first chunk: refused, not an overflow that traps.
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n7fffffffffffffff\r\n", 413),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999999\r\n\r\n", 413),
        ("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17000) + "\r\n\r\n", 431),
        ("GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X: y\r\n", count: 101) + "\r\n", 431),
        ("GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", 417),
    ])
    func refusesWithStatus(request: String, status: Int) {
        for split in [0, 1, 5] {
            let (requests, error) = parse(request, split: split)
            #expect(requests.isEmpty, "split \(split)")
            #expect(error?.status == status, "split \(split): \(error?.description ?? "accepted")")
        }
    }

    /// `Expect: 100-continue` is announced once, before the body, and the request completes after it.
    @Test func expectContinue() throws {
        var parser = HTTPRequestParser()
        parser.append(Array("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8))
        guard case .expectsContinue = try parser.next() else {
            Issue.record("no continue")
            return
        }
        guard case .needMore = try parser.next() else {
            Issue.record("continue announced twice")
            return
        }
        parser.append(Array("ok".utf8))
        guard case .request(let request) = try parser.next() else {
            Issue.record("no request")
            return
        }
        #expect(request.body == Array("ok".utf8))
    }

    /// Leading empty lines before a request line are ignored, as RFC 9112 §2.2 allows.
    @Test func leadingEmptyLines() {
        let (requests, error) = parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", split: 1)
        #expect(error == nil)
        #expect(requests.count == 1)
    }
}
