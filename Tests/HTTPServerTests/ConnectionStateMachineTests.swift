import Testing

@testable import HTTPServer

/// The connection's life as event scripts: bytes and happenings in, the loop's actions out.
@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    static let second: UInt64 = 1_000_000_000

    /// Drives one machine and renders its actions as short words.
    struct Script {
        var machine: ConnectionStateMachine
        var now: UInt64 = 0

        init(limits: HTTPLimits = HTTPLimits()) {
            machine = ConnectionStateMachine(
                limits: limits,
                timeouts: .init(request: 10 * second, idle: 60 * second, write: 30 * second), now: 0)
        }

        mutating func at(_ seconds: Double) {
            now = UInt64(seconds * Double(second))
        }

        /// Feeds one event and renders the actions it produced.
        private mutating func run(
            _ event: (inout ConnectionStateMachine, UInt64, inout [ConnectionAction]) -> Void
        ) -> [String] {
            var actions: [ConnectionAction] = []
            event(&machine, now, &actions)
            return Self.render(actions)
        }

        mutating func receive(_ text: String) -> [String] {
            let bytes = Array(text.utf8)
            return run { machine, now, actions in
                bytes.withUnsafeBytes { machine.received($0, now: now, into: &actions) }
            }
        }

        mutating func answer(_ status: Int = 200) -> [String] {
            run { $0.handlerFinished(HTTPResponse(status: status), now: $1, into: &$2) }
        }

        mutating func peerCloses() -> [String] { run { $0.peerClosed(now: $1, into: &$2) } }
        mutating func written() -> [String] { run { $0.wrote(drained: true, now: $1, into: &$2) } }
        /// Some bytes written, the rest waits for the socket.
        mutating func writtenInPart() -> [String] { run { $0.wrote(drained: false, now: $1, into: &$2) } }
        mutating func tick() -> [String] { run { $0.tick(now: $1, into: &$2) } }
        mutating func stop() -> [String] { run { $0.stop(now: $1, into: &$2) } }

        static func render(_ actions: [ConnectionAction]) -> [String] {
            actions.map { action in
                switch action {
                case .handle(let request): "handle \(request.method) \(request.path)"
                case .respond(let response, let keepAlive, let includeBody):
                    "respond \(response.status) \(keepAlive ? "keep-alive" : "close")\(includeBody ? "" : " no-body")"
                case .sendContinue: "continue"
                case .flush: "flush"
                case .stopReading: "stop-reading"
                case .lingeringClose: "linger"
                case .close: "close"
                }
            }
        }
    }

    static func get(_ path: String, _ extra: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: t\r\n\(extra)\r\n"
    }

    /// Pipelined requests are handled one at a time, in order, each after the previous answer.
    @Test func pipelining() {
        var script = Script()
        #expect(script.receive(Self.get("/a") + Self.get("/b") + Self.get("/c")) == ["handle GET /a", "flush"])
        #expect(script.answer() == ["respond 200 keep-alive", "handle GET /b", "flush"])
        #expect(script.answer(201) == ["respond 201 keep-alive", "handle GET /c", "flush"])
        #expect(script.answer() == ["respond 200 keep-alive", "flush"])
        #expect(script.written() == [])
        #expect(script.machine.isIdle)
    }

    /// `Connection: close` from the client: its answer is the last, then the lingering close.
    @Test func clientAsksToClose() {
        var script = Script()
        #expect(script.receive(Self.get("/a", "Connection: close\r\n") + Self.get("/b")) == ["handle GET /a", "flush"])
        #expect(script.answer() == ["respond 200 close", "flush"])
        #expect(script.receive(Self.get("/c")) == [])
        #expect(script.written() == ["linger"])
    }

    /// The client half-closes: while a handler runs, its answer still goes out (and closes);
    /// idle or mid-request, the connection closes at once.
    @Test(arguments: [true, false])
    func halfClose(whileHandlerRuns: Bool) {
        var script = Script()
        if whileHandlerRuns {
            #expect(script.receive(Self.get("/a")) == ["handle GET /a", "flush"])
            #expect(script.peerCloses() == ["stop-reading"])
            #expect(script.answer() == ["respond 200 close", "flush"])
            #expect(script.written() == ["linger"])
        } else {
            #expect(script.receive("GET /a HTTP/1.1\r\nHo") == ["flush"])
            #expect(script.peerCloses() == ["close"])
        }
        var idle = Script()
        #expect(idle.peerCloses() == ["close"])
    }

    /// A half-close while the last answer is still being written waits for the write, then closes.
    @Test func halfCloseWhileWriting() {
        var script = Script()
        _ = script.receive(Self.get("/a"))
        #expect(script.answer() == ["respond 200 keep-alive", "flush"])
        _ = script.writtenInPart()
        #expect(script.peerCloses() == ["stop-reading", "flush"])
        #expect(script.written() == ["linger"])
    }

    /// A handler that finishes after the client left is not answered.
    @Test func handlerFinishesAfterTheClientLeft() {
        var script = Script()
        _ = script.receive(Self.get("/a") + "GET /b HT")
        #expect(script.peerCloses() == ["close"])
        #expect(script.answer() == [])
    }

    /// Oversize heads and broken framing get their error answer with `Connection: close`, and
    /// nothing after them is read.
    @Test(arguments: [
        ("GET /\(String(repeating: "a", count: 200)) HTTP/1.1\r\n", 414),
        ("GET / HTTP/1.1\r\nHost: t\r\nX: \(String(repeating: "b", count: 600))\r\n\r\n", 431),
        ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 12x\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", 413),
    ])
    func refusedRequests(text: String, status: Int) {
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = 100
        limits.maxHeaderBytes = 512
        limits.maxHeaderCount = 10
        limits.maxBodyBytes = 1000
        var script = Script(limits: limits)
        #expect(script.receive(text) == ["respond \(status) close", "stop-reading", "flush"])
        #expect(script.receive(Self.get("/next")) == [])
        #expect(script.written() == ["linger"])
    }

    /// A request not complete in 10 s gets 408; a connection that sends nothing closes after 10 s, an
    /// idle keep-alive after 60 s; a client that does not read its answer is cut off after 30 s
    /// without progress.
    @Test func timeouts() {
        var slow = Script()
        #expect(slow.receive("GET /a HTTP/1.1\r\n") == ["flush"])
        slow.at(9)
        #expect(slow.tick() == [])
        slow.at(10.5)
        #expect(slow.tick() == ["respond 408 close", "stop-reading", "flush"])
        #expect(slow.written() == ["linger"])

        var idle = Script()
        _ = idle.receive(Self.get("/a"))
        _ = idle.answer()
        _ = idle.written()
        idle.at(59)
        #expect(idle.tick() == [])
        idle.at(61)
        #expect(idle.tick() == ["close"])

        var silent = Script()
        silent.at(9)
        #expect(silent.tick() == [])
        silent.at(10.5)
        #expect(silent.tick() == ["close"], "a connection that never sent a byte holds no slot for 60 s")

        var stalled = Script()
        _ = stalled.receive(Self.get("/a"))
        _ = stalled.answer()
        stalled.at(5)
        #expect(stalled.writtenInPart() == [])
        stalled.at(34)
        #expect(stalled.tick() == [])
        stalled.at(36)
        #expect(stalled.tick() == ["close"])

        var busy = Script()
        _ = busy.receive(Self.get("/a"))
        busy.at(100)
        #expect(busy.tick() == [], "a running handler is not timed out by the connection")
    }

    /// `Expect: 100-continue` gets its interim answer before the body is sent; HEAD has no body.
    @Test func continueAndHead() {
        var script = Script()
        let head = "POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
        #expect(script.receive(head) == ["continue", "flush"])
        #expect(script.receive("ok") == ["handle POST /e", "flush"])
        #expect(script.answer() == ["respond 200 keep-alive", "flush"])
        #expect(script.receive("HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n") == ["handle HEAD /h", "flush"])
        #expect(script.answer() == ["respond 200 keep-alive no-body", "flush"])
    }

    /// Stopping closes an idle connection at once and lets a busy one finish, with `Connection: close`.
    @Test func stopping() {
        var idle = Script()
        #expect(idle.stop() == ["close"])
        var busy = Script()
        _ = busy.receive(Self.get("/a") + Self.get("/b"))
        #expect(busy.stop() == [])
        #expect(busy.answer() == ["respond 200 close", "flush"])
        #expect(busy.written() == ["linger"])
    }
}
