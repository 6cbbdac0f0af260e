/// Maps a method and path to a handler, with `{name}` segments as path parameters.
///
/// ```swift
/// var router = Router()
/// router.add("GET", "/v1/orders/{id}") { request in … request.pathParameters["id"] … }
/// ```
public struct Router: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// A handler that answers through its `Responder`, possibly later and from another thread: a
    /// write hands its transaction to the store and returns, and the commit's completion answers,
    /// so that no thread waits for the disk.
    public typealias DeferredHandler = @Sendable (HTTPRequest, Responder) -> Void
    /// An answer the event loop may give at once when everything it needs is in memory, or `nil`
    /// when it is not (a store read, a build): the route's pooled handler then answers.
    public typealias MemoryHandler = @Sendable (HTTPRequest) -> HTTPResponse?

    /// A deferred handler's start on the event loop, when all it needs before its write is in
    /// memory (the caller's key cached, nothing to read): the rest of the start, which the loop runs
    /// at once with the request's responder; `nil`, having done nothing, when the start must go to
    /// the pool.
    public typealias DeferredAttempt = @Sendable (HTTPRequest) -> ((Responder) -> Void)?

    /// Where a handler runs. `inline` handlers run on the event loop and must not block (health
    /// checks, answers from memory); `pool` handlers run on a worker thread, so a slow one (a disk
    /// read) never stalls other connections; `deferred` ones start on a worker thread and answer
    /// whenever their responder is called; `fromMemory` ones are tried on the event loop and go to
    /// the pool when they cannot answer without blocking: an answer kept in memory skips the pool's
    /// queue and two thread wake-ups, which on a saturated machine are most of its time.
    /// `deferredFromMemory` ones start on the event loop when their attempt can, the same way,
    /// and on a worker thread otherwise.
    public enum Execution: Sendable {
        case inline
        case pool
        case deferred(DeferredHandler)
        case fromMemory(MemoryHandler)
        case deferredFromMemory(DeferredAttempt, DeferredHandler)
    }

    /// The outcome of a lookup.
    public enum Resolution: Sendable {
        /// `route` is the route's index in `registeredRoutes`, whose pattern (`/v1/orders/{id}`) is a
        /// label of bounded cardinality.
        /// For a deferred route, `Handler` waits for its answer: what a caller with a thread to spare
        /// (a test) may call; the event loops use the `deferred` handler of `execution`.
        case found(Handler, parameters: [String: String], execution: Execution, route: Int)
        case notFound
        case methodNotAllowed(allow: [String])
    }

    private struct Route: Sendable {
        let method: String
        let pattern: String
        let segments: [Segment]
        let execution: Execution
        let handler: Handler
    }

    private enum Segment: Sendable, Hashable {
        case literal(String)
        case parameter(String)
    }

    private var routes: [Route] = []
    /// Routes without parameters by exact path: most requests resolve with one hash lookup.
    private var staticRoutes: [String: [Int]] = [:]

    public init() {}

    /// Registers a handler; `HEAD` is answered by the `GET` handler without its body.
    public mutating func add(
        _ method: String, _ pattern: String, execution: Execution = .pool, _ handler: @escaping Handler
    ) {
        let segments = pattern.split(separator: "/").map { part -> Segment in
            part.hasPrefix("{") && part.hasSuffix("}")
                ? .parameter(String(part.dropFirst().dropLast())) : .literal(String(part))
        }
        if segments.allSatisfy({ if case .literal = $0 { true } else { false } }) {
            let path =
                "/" + segments.map { if case .literal(let text) = $0 { text } else { "" } }.joined(separator: "/")
            staticRoutes[path, default: []].append(routes.count)
        }
        routes.append(
            Route(method: method, pattern: pattern, segments: segments, execution: execution, handler: handler))
    }

    /// Registers a handler that answers through its responder (see `DeferredHandler`).
    public mutating func add(_ method: String, _ pattern: String, deferred handler: @escaping DeferredHandler) {
        add(method, pattern, execution: .deferred(handler)) { request in
            Responder.waitForAnswer(of: handler, to: request)
        }
    }

    /// Registers a deferred handler with an attempt to start it on the event loop first (see
    /// `DeferredAttempt`).
    public mutating func add(
        _ method: String, _ pattern: String, deferredFromMemory attempt: @escaping DeferredAttempt,
        deferred handler: @escaping DeferredHandler
    ) {
        add(method, pattern, execution: .deferredFromMemory(attempt, handler)) { request in
            Responder.waitForAnswer(of: handler, to: request)
        }
    }

    /// Registers a pooled handler with an attempt from memory first (see `MemoryHandler`).
    public mutating func add(
        _ method: String, _ pattern: String, fromMemory attempt: @escaping MemoryHandler,
        _ handler: @escaping Handler
    ) {
        add(method, pattern, execution: .fromMemory(attempt), handler)
    }

    /// Every registered `(method, pattern)`, for documentation checks.
    public var registeredRoutes: [(method: String, pattern: String)] { routes.map { ($0.method, $0.pattern) } }

    /// The pattern of the route `resolve` reported by index.
    public func pattern(ofRoute index: Int) -> String { routes[index].pattern }

    /// Finds the handler for a request; `405` lists the methods the path does allow.
    public func resolve(method: String, path: String) -> Resolution {
        if let candidates = staticRoutes[path] {
            for index in candidates
            where routes[index].method == method || (method == "HEAD" && routes[index].method == "GET") {
                return .found(routes[index].handler, parameters: [:], execution: routes[index].execution, route: index)
            }
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let pathSegments = parts.last == "" && parts.count > 1 ? Array(parts.dropLast()) : Array(parts)
        var allowed: [String] = []
        for (index, route) in routes.enumerated() {
            guard let parameters = Self.match(route.segments, pathSegments) else { continue }
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                return .found(route.handler, parameters: parameters, execution: route.execution, route: index)
            }
            allowed.append(route.method)
            if route.method == "GET" { allowed.append("HEAD") }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allow: Array(Set(allowed)).sorted())
    }

    private static func match(_ segments: [Segment], _ path: [Substring]) -> [String: String]? {
        if segments.isEmpty { return path == [""] || path.isEmpty ? [:] : nil }
        guard segments.count == path.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, path) {
            switch segment {
            case .literal(let text): guard part == text else { return nil }
            case .parameter(let name):
                guard !part.isEmpty else { return nil }
                parameters[name] = percentDecoded(part) ?? String(part)
            }
        }
        return parameters
    }

    /// A path segment with its `%XX` escapes decoded (`a%3Ab` is `a:b`), or nil when an escape is
    /// malformed or the result is not UTF-8; the handler then sees the raw text and refuses it.
    static func percentDecoded(_ segment: Substring) -> String? {
        guard segment.utf8.contains(UInt8(ascii: "%")) else { return String(segment) }
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        var input = segment.utf8.makeIterator()
        while let byte = input.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = input.next().flatMap(hexValue), let low = input.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
