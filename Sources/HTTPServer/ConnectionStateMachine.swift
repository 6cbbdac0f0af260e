/// What the event loop must do for a connection, as the state machine decided it.
enum ConnectionAction {
    /// Run the request's handler (route it); answer with `handlerFinished`. Reading pauses meanwhile:
    /// pipelined requests wait in the parser, so answers go out in order.
    case handle(HTTPRequest)
    /// Queue this response, framed as told; the loop records it (statistics, access log).
    case respond(HTTPResponse, keepAlive: Bool, includeBody: Bool)
    /// Queue `HTTP/1.1 100 Continue`.
    case sendContinue
    /// Write what is queued.
    case flush
    /// Stop watching for input (the client's next bytes are not wanted).
    case stopReading
    /// Half-close, drain briefly and close: everything queued has been written.
    case lingeringClose
    /// Close now; nothing more will be written.
    case close
}

/// One connection's life as a value: reading a request's head and body, waiting for its handler,
/// writing, keep-alive, closing. Bytes and happenings go in; `ConnectionAction`s come out for the
/// loop to carry out. It does no I/O and reads no clock (times come in as monotonic nanoseconds), so
/// every path is testable as a script of events.
///
/// The rules:
/// - Requests are answered one at a time, in order; pipelined ones wait in the parser.
/// - A malformed request gets its error answer with `Connection: close`, and nothing after it.
/// - The client closing its side while idle or mid-request closes the connection; while a handler
///   runs or a response is being written, that one response still goes out (`Connection: close`).
/// - A handler that finishes after the client left is never asked about (the loop drops it).
/// - A request not complete within the request timeout gets `408` and the connection closes; an idle
///   keep-alive connection closes after the idle timeout; a client not reading its response is cut
///   off after the write timeout.
/// - When the server stops, idle connections close at once and busy ones finish their request.
struct ConnectionStateMachine {
    enum State: Equatable {
        /// Reading (or waiting for) the next request.
        case open
        /// A handler is computing the answer to `inFlight`.
        case waitingForHandler(keepAlive: Bool, includeBody: Bool)
        /// The last response is queued; close once it is written.
        case closing
        case closed
    }

    struct Timeouts {
        var request: UInt64
        var idle: UInt64
        var write: UInt64
    }

    private(set) var state = State.open
    private(set) var parser: HTTPRequestParser
    /// The request being answered, for the statistics and the access log.
    var inFlight: InFlight?
    private let timeouts: Timeouts
    private var inputClosed = false
    private var stopping = false
    private var outputPending = false
    /// When the first byte of the request in progress arrived.
    private var requestStarted: UInt64?
    private var lastActivity: UInt64
    /// Whether the client sent anything yet.
    private var hasReceived = false
    private var writeProgress: UInt64

    init(limits: HTTPLimits, timeouts: Timeouts, now: UInt64) {
        parser = HTTPRequestParser(limits: limits)
        self.timeouts = timeouts
        lastActivity = now
        writeProgress = now
    }

    private var isWaitingForHandler: Bool {
        if case .waitingForHandler = state { true } else { false }
    }

    /// Nothing in progress: no request half-read, no handler running, nothing left to write.
    var isIdle: Bool { state == .open && !outputPending && !parser.isMidRequest }

    /// Bytes from the client.
    mutating func received(_ bytes: UnsafeRawBufferPointer, now: UInt64, into actions: inout [ConnectionAction]) {
        // Closing: the last answer is queued and nothing after it will be read.
        guard state == .open || isWaitingForHandler, !inputClosed else { return }
        if requestStarted == nil { requestStarted = now }
        hasReceived = true
        lastActivity = now
        parser.append(bytes)
        processBuffered(now: now, into: &actions)
    }

    /// The client closed its sending side (a read returned 0).
    mutating func peerClosed(now: UInt64, into actions: inout [ConnectionAction]) {
        guard state != .closed, !inputClosed else { return }
        inputClosed = true
        if isIdle || parser.isMidRequest {
            // Nothing to answer, or a request that will never be complete.
            state = .closed
            actions.append(.close)
        } else {
            // Still reads: the answer in progress is the last one.
            actions.append(.stopReading)
            if state == .open { beginClosing(into: &actions) }
        }
    }

    /// The handler of the request in flight answered.
    mutating func handlerFinished(_ response: HTTPResponse, now: UInt64, into actions: inout [ConnectionAction]) {
        guard case .waitingForHandler(let keepAlive, let includeBody) = state else { return }
        let staysOpen = keepAlive && !inputClosed && !stopping
        respond(response, keepAlive: staysOpen, includeBody: includeBody, now: now, into: &actions)
        if staysOpen {
            state = .open
            processBuffered(now: now, into: &actions)
        } else {
            beginClosing(into: &actions)
        }
    }

    /// The loop wrote some queued bytes; `drained` when nothing is left (else the socket is full and
    /// the loop waits until it can write again: progress, for the write timeout).
    mutating func wrote(drained: Bool, now: UInt64, into actions: inout [ConnectionAction]) {
        writeProgress = now
        outputPending = !drained
        if drained, state == .closing {
            state = .closed
            actions.append(.lingeringClose)
        }
    }

    /// The loop's periodic sweep: the timeouts.
    mutating func tick(now: UInt64, into actions: inout [ConnectionAction]) {
        guard state != .closed else { return }
        if outputPending {
            if now - writeProgress > timeouts.write { closeNow(into: &actions) }
        } else if let started = requestStarted, parser.isMidRequest, state == .open {
            if now - started > timeouts.request {
                inFlight = InFlight(method: "-", path: "-", started: started)
                respond(
                    ResponseWriter.error(408, code: .requestTimeout, message: "request not completed in time"),
                    keepAlive: false, includeBody: true, now: now, into: &actions)
                actions.append(.stopReading)
                beginClosing(into: &actions)
            }
        } else if isIdle, now - lastActivity > (hasReceived ? timeouts.idle : timeouts.request) {
            // A client that never sent a byte gets the request timeout, not the keep-alive one: a
            // silent socket is holding a slot, not resting between requests.
            closeNow(into: &actions)
        }
    }

    /// The server is stopping: idle connections close now, busy ones after their current answer.
    mutating func stop(now: UInt64, into actions: inout [ConnectionAction]) {
        stopping = true
        if isIdle { closeNow(into: &actions) }
    }

    private mutating func closeNow(into actions: inout [ConnectionAction]) {
        state = .closed
        actions.append(.close)
    }

    private mutating func beginClosing(into actions: inout [ConnectionAction]) {
        state = .closing
        actions.append(.flush)
    }

    private mutating func respond(
        _ response: HTTPResponse, keepAlive: Bool, includeBody: Bool, now: UInt64,
        into actions: inout [ConnectionAction]
    ) {
        actions.append(.respond(response, keepAlive: keepAlive, includeBody: includeBody))
        if !outputPending { writeProgress = now }
        outputPending = true
        lastActivity = now
    }

    /// Answers buffered requests in order until one waits for its handler or the bytes run out.
    private mutating func processBuffered(now: UInt64, into actions: inout [ConnectionAction]) {
        while state == .open {
            let event: HTTPParseEvent
            do {
                event = try parser.next()
            } catch {
                inFlight = InFlight(method: "-", path: "-", started: requestStarted ?? now)
                respond(
                    ResponseWriter.error(
                        error.status, code: .forRefusal(status: error.status), message: error.reason),
                    keepAlive: false, includeBody: true, now: now, into: &actions)
                actions.append(.stopReading)
                beginClosing(into: &actions)
                return
            }
            switch event {
            case .needMore:
                if !parser.isMidRequest { requestStarted = nil }
                actions.append(.flush)
                return
            case .expectsContinue:
                actions.append(.sendContinue)
            case .request(var request):
                inFlight = InFlight(method: request.method, path: request.path, started: requestStarted ?? now)
                requestStarted = parser.isMidRequest ? now : nil
                request.keepAlive = request.keepAlive && !stopping
                state = .waitingForHandler(keepAlive: request.keepAlive, includeBody: request.method != "HEAD")
                actions.append(.handle(request))
            }
        }
        actions.append(.flush)
    }
}
