internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// A small blocking HTTP/1.1 listener: a thread accepts, each connection is served on its own thread,
/// one request per connection (`Connection: close`), bodies by `Content-Length` only.
///
/// It exists for health checks and tools that need a socket with little code; it is not built for
/// load, keep-alive or hostile clients.
public final class BasicHTTPListener: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse

    /// The largest header block accepted; larger gets `431`.
    public static let maxHeaderBytes = 16 * 1024
    /// The largest body accepted; larger gets `413`.
    public static let maxBodyBytes = 1024 * 1024

    private let socket: Int32
    private let handler: Handler
    private let stopped = Atomic<Bool>(false)
    /// The port actually bound (useful when asked for port 0).
    public let boundAddress: ListenAddress

    /// Binds and listens; serving starts with `start()`.
    /// - Throws: `SystemError` naming the failed call (address in use, permission denied, …).
    public init(address: ListenAddress, handler: @escaping Handler) throws(SystemError) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(function: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = address.port.bigEndian
        inet_pton(AF_INET, address.host, &socketAddress.sin_addr)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let error = SystemError(function: bound == 0 ? "listen" : "bind", errno: errno)
            close(fd)
            throw error
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.socket = fd
        self.handler = handler
        self.boundAddress = ListenAddress(host: address.host, port: UInt16(bigEndian: actual.sin_port))
    }

    deinit {
        close(socket)
    }

    /// Starts the accept thread and returns at once.
    public func start() {
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "http-accept"
        thread.start()
    }

    /// Stops accepting; connections being served finish on their own.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(socket, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            let client = accept4Compatible()
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func accept4Compatible() -> Int32 {
        let fd = accept(socket, nil, nil)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return fd
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let response: HTTPResponse
        switch readRequest(client) {
        case .success(let request): response = handler(request)
        case .failure(let status):
            write(HTTPResponse(status: status), to: client)
            drainBeforeClose(client)
            return
        case .closed: return
        }
        write(response, to: client)
    }

    /// After refusing a request the client may still be sending; closing with unread bytes makes the
    /// kernel send a reset that can destroy the response in flight. Half-close and read what is left
    /// (bounded in bytes and time) so the client sees the answer.
    private func drainBeforeClose(_ client: Int32) {
        shutdown(client, Int32(SHUT_WR))
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        var drained = 0
        while drained < 4 * Self.maxBodyBytes {
            let count = recv(client, &scratch, scratch.count, 0)
            if count <= 0 { return }
            drained += count
        }
    }

    private enum ReadResult {
        case success(HTTPRequest)
        case failure(Int)
        case closed
    }

    private func readRequest(_ client: Int32) -> ReadResult {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let terminator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            let count = recv(client, &chunk, chunk.count, 0)
            if count <= 0 { return buffer.isEmpty ? .closed : .failure(400) }
            buffer.append(contentsOf: chunk[0..<count])
            headerEnd = buffer.firstRange(of: terminator)?.upperBound
            if (headerEnd ?? buffer.count) > Self.maxHeaderBytes { return .failure(431) }
        }
        guard let headerEnd, let head = String(validating: buffer[..<(headerEnd - 4)], as: UTF8.self) else {
            return .failure(400)
        }
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return .failure(400) }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return .failure(400) }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((String(line[..<colon]), value))
        }
        let target = parts[1]
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var request = HTTPRequest(
            method: String(parts[0]), path: String(path[0]), query: path.count > 1 ? String(path[1]) : nil,
            headers: headers
        )
        if request.header("Transfer-Encoding") != nil { return .failure(501) }
        let length = request.header("Content-Length").map { Int($0) } ?? 0
        guard let length, length >= 0 else { return .failure(400) }
        guard length <= Self.maxBodyBytes else { return .failure(413) }
        var body = Array(buffer[headerEnd...])
        while body.count < length {
            let count = recv(client, &chunk, chunk.count, 0)
            if count <= 0 { return .failure(400) }
            body.append(contentsOf: chunk[0..<count])
        }
        request.body = Array(body.prefix(length))
        return .success(request)
    }

    private func write(_ response: HTTPResponse, to client: Int32) {
        var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + response.body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return }
            sent += count
        }
    }
}
