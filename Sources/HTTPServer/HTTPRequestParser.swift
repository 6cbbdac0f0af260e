/// Limits the parser enforces, each answered with its own status.
public struct HTTPLimits: Sendable, Hashable {
    /// Longest request line (method, target, version); longer gets `414`.
    public var maxRequestLineBytes = 8 * 1024
    /// Largest header block, request line included; larger gets `431`.
    public var maxHeaderBytes = 16 * 1024
    /// Most header fields; more gets `431`.
    public var maxHeaderCount = 100
    /// Largest body, after de-chunking; larger gets `413`.
    public var maxBodyBytes = 1024 * 1024

    public init() {}
}

/// A request the parser refused, with the status to answer before closing the connection.
public struct HTTPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let status: Int
    public let reason: String

    public var description: String { "\(status) \(reason)" }
}

/// What the parser has for its owner after more bytes arrived.
package enum HTTPParseEvent: Sendable {
    /// A complete request; the parser is ready for the next one (pipelining).
    case request(HTTPRequest)
    /// The head asked for `100 Continue` before sending its body.
    case expectsContinue
    /// Nothing complete yet.
    case needMore
}

/// An incremental HTTP/1.1 request parser, strict to RFC 9112.
///
/// Bytes may arrive split anywhere; the same bytes give the same requests however they are split.
/// It refuses what request smuggling is built from: both `Transfer-Encoding` and `Content-Length`,
/// duplicate or malformed lengths, codings other than `chunked`, folded header lines, bare LF, NUL
/// and whitespace before a header's colon. After an error the connection must be closed.
package struct HTTPRequestParser {
    private struct Head {
        var request: HTTPRequest
        var chunked: Bool
        var contentLength: Int
        var expectsContinue: Bool
    }

    private enum State {
        case head
        case fixedBody(Head)
        case chunkSize(Head)
        case chunkData(Head, remaining: Int)
        case chunkDataEnd(Head)
        case trailers(Head, bytes: Int)
        case failed(HTTPParseError)
    }

    private let limits: HTTPLimits
    private var buffer: [UInt8] = []
    private var position = 0
    private var scanned = 0
    private var state = State.head
    private var announcedContinue = false

    package init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    /// Bytes received but not yet consumed by a complete request.
    package var bufferedByteCount: Int { buffer.count - position }

    /// True while a request has started arriving but is not complete.
    package var isMidRequest: Bool {
        if case .head = state { return bufferedByteCount > 0 }
        return true
    }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            scanned = 0
            position = 0
        }
        buffer.append(contentsOf: bytes)
    }

    package mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next event; call again after a `.request` until `.needMore`.
    package mutating func next() throws(HTTPParseError) -> HTTPParseEvent {
        do {
            return try step()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(HTTPParseError) -> HTTPParseEvent {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .head:
                guard let head = try parseHead() else { return .needMore }
                announcedContinue = false
                if head.chunked {
                    state = .chunkSize(head)
                } else if head.contentLength > 0 {
                    state = .fixedBody(head)
                } else {
                    state = .head
                    return .request(head.request)
                }
            case .fixedBody(var head):
                guard bufferedByteCount >= head.contentLength else {
                    return continueIfAsked(head)
                }
                head.request.body = Array(buffer[position..<(position + head.contentLength)])
                position += head.contentLength
                state = .head
                compact()
                return .request(head.request)
            case .chunkSize(let head):
                guard
                    let line = try takeLine(
                        limit: 1024, tooLong: HTTPParseError(status: 400, reason: "chunk size line too long"))
                else { return continueIfAsked(head) }
                let sizeText = line.prefix { $0 != UInt8(ascii: ";") }
                guard !sizeText.isEmpty, sizeText.count <= 16, sizeText.allSatisfy(Self.isHexDigit),
                    let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16)
                else { throw HTTPParseError(status: 400, reason: "malformed chunk size") }
                if size == 0 {
                    state = .trailers(head, bytes: 0)
                } else {
                    // Compared without adding: a size near Int.max would overflow the sum and trap.
                    guard size <= limits.maxBodyBytes - head.request.body.count else {
                        throw HTTPParseError(status: 413, reason: "body larger than \(limits.maxBodyBytes) bytes")
                    }
                    state = .chunkData(head, remaining: size)
                }
            case .chunkData(var head, let remaining):
                let available = min(remaining, bufferedByteCount)
                guard available > 0 else { return continueIfAsked(head) }
                head.request.body.append(contentsOf: buffer[position..<(position + available)])
                position += available
                state =
                    available == remaining ? .chunkDataEnd(head) : .chunkData(head, remaining: remaining - available)
            case .chunkDataEnd(let head):
                guard bufferedByteCount >= 2 else { return .needMore }
                guard buffer[position] == 0x0D, buffer[position + 1] == 0x0A else {
                    throw HTTPParseError(status: 400, reason: "chunk data not followed by CRLF")
                }
                position += 2
                state = .chunkSize(head)
            case .trailers(let head, let bytes):
                guard
                    let line = try takeLine(
                        limit: limits.maxHeaderBytes, tooLong: HTTPParseError(status: 431, reason: "trailers too large")
                    )
                else { return .needMore }
                if line.isEmpty {
                    state = .head
                    compact()
                    return .request(head.request)
                }
                guard bytes + line.count <= limits.maxHeaderBytes else {
                    throw HTTPParseError(status: 431, reason: "trailers too large")
                }
                _ = try Self.parseField(line)
                state = .trailers(head, bytes: bytes + line.count + 2)
            }
        }
    }

    private mutating func continueIfAsked(_ head: Head) -> HTTPParseEvent {
        guard head.expectsContinue, !announcedContinue else { return .needMore }
        announcedContinue = true
        return .expectsContinue
    }

    private mutating func compact() {
        if position > 64 * 1024 || position == buffer.count {
            buffer.removeSubrange(0..<position)
            scanned = max(0, scanned - position)
            position = 0
        }
    }

    /// Takes one CRLF-terminated line; a bare LF is an error.
    private mutating func takeLine(limit: Int, tooLong: HTTPParseError) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        guard let newline = buffer[position...].firstIndex(of: 0x0A) else {
            if bufferedByteCount > limit { throw tooLong }
            return nil
        }
        guard newline > position, buffer[newline - 1] == 0x0D else {
            throw HTTPParseError(status: 400, reason: "bare LF")
        }
        guard newline - position <= limit else { throw tooLong }
        let line = buffer[position..<(newline - 1)]
        position = newline + 1
        return line
    }

    /// Parses the request line and header fields once the blank line has arrived.
    private mutating func parseHead() throws(HTTPParseError) -> Head? {
        // RFC 9112 §2.2: a server should ignore at least one empty line before the request line.
        while bufferedByteCount >= 2, buffer[position] == 0x0D, buffer[position + 1] == 0x0A { position += 2 }
        let from = max(position, scanned)
        var end: Int?
        var index = from
        while index + 3 < buffer.count {
            if buffer[index] == 0x0D, buffer[index + 1] == 0x0A, buffer[index + 2] == 0x0D, buffer[index + 3] == 0x0A {
                end = index
                break
            }
            index += 1
        }
        guard let end else {
            // A bare LF is refused as soon as it arrives, not when the (never coming) CRLFCRLF does.
            for offset in from..<buffer.count where buffer[offset] == 0x0A {
                if offset == position || buffer[offset - 1] != 0x0D {
                    throw HTTPParseError(status: 400, reason: "bare LF")
                }
            }
            scanned = max(position, buffer.count - 3)
            // The request line is refused as soon as it is too long, complete or not.
            let requestLineLength = buffer[position...].firstIndex(of: 0x0A).map { $0 - position - 1 }
            if (requestLineLength ?? bufferedByteCount) > limits.maxRequestLineBytes {
                throw HTTPParseError(
                    status: 414, reason: "request line longer than \(limits.maxRequestLineBytes) bytes")
            }
            if bufferedByteCount > limits.maxHeaderBytes {
                throw HTTPParseError(status: 431, reason: "header block larger than \(limits.maxHeaderBytes) bytes")
            }
            return nil
        }
        let block = buffer[position..<end]
        position = end + 4
        scanned = position
        guard block.count <= limits.maxHeaderBytes else {
            throw HTTPParseError(status: 431, reason: "header block larger than \(limits.maxHeaderBytes) bytes")
        }

        // One pass over the lines: the request line, then each field, noting what framing needs.
        var framing = Framing()
        var request: HTTPRequest?
        var lineStart = block.startIndex
        var fieldCount = 0
        var offset = block.startIndex
        while offset <= block.endIndex {
            guard offset == block.endIndex || block[offset] == 0x0A else {
                if block[offset] == 0x0D, offset + 1 < block.endIndex, block[offset + 1] != 0x0A {
                    throw HTTPParseError(status: 400, reason: "bare CR")
                }
                offset += 1
                continue
            }
            let lineEnd: Int
            if offset == block.endIndex {
                lineEnd = offset
            } else {
                guard offset > lineStart, block[offset - 1] == 0x0D else {
                    throw HTTPParseError(status: 400, reason: "bare LF")
                }
                lineEnd = offset - 1
            }
            let line = block[lineStart..<lineEnd]
            if request == nil {
                guard line.count <= limits.maxRequestLineBytes else {
                    throw HTTPParseError(
                        status: 414, reason: "request line longer than \(limits.maxRequestLineBytes) bytes")
                }
                request = try Self.parseRequestLine(line)
            } else {
                fieldCount += 1
                guard fieldCount <= limits.maxHeaderCount else {
                    throw HTTPParseError(status: 431, reason: "more than \(limits.maxHeaderCount) header fields")
                }
                if let first = line.first, first == 0x20 || first == 0x09 {
                    throw HTTPParseError(status: 400, reason: "folded header line")
                }
                let field = try Self.parseField(line)
                framing.note(field)
                request!.headers.append(field)
            }
            lineStart = offset + 1
            offset += 1
        }
        guard let request else { throw HTTPParseError(status: 400, reason: "malformed request line") }
        return try frame(request, framing)
    }

    /// The header fields that decide framing and the connection's fate, gathered while parsing.
    private struct Framing {
        var hosts = 0
        var contentLengths: [String] = []
        var transferCodings: [String] = []
        var connectionClose = false
        var expect: String?

        mutating func note(_ field: (name: String, value: String)) {
            let name = field.name.utf8
            switch name.count {
            case 4 where HTTPRequestParser.equalsIgnoringCase(field.name, "host"): hosts += 1
            case 6 where HTTPRequestParser.equalsIgnoringCase(field.name, "expect"): expect = field.value
            case 10 where HTTPRequestParser.equalsIgnoringCase(field.name, "connection"):
                for token in field.value.split(separator: ",")
                where HTTPRequestParser.equalsIgnoringCase(String(token).trimmingASCIIWhitespace(), "close") {
                    connectionClose = true
                }
            case 14 where HTTPRequestParser.equalsIgnoringCase(field.name, "content-length"):
                contentLengths.append(field.value)
            case 17 where HTTPRequestParser.equalsIgnoringCase(field.name, "transfer-encoding"):
                transferCodings.append(field.value)
            default: break
            }
        }
    }

    /// Decides the body's framing and the connection's fate from the header fields.
    private func frame(_ request: HTTPRequest, _ framing: Framing) throws(HTTPParseError) -> Head {
        var request = request
        if request.version == .http11 && framing.hosts != 1 {
            throw HTTPParseError(status: 400, reason: framing.hosts == 0 ? "missing Host" : "more than one Host")
        }
        var chunked = false
        var contentLength = 0
        if !framing.transferCodings.isEmpty {
            guard framing.contentLengths.isEmpty else {
                throw HTTPParseError(status: 400, reason: "both Transfer-Encoding and Content-Length")
            }
            guard request.version == .http11 else {
                throw HTTPParseError(status: 400, reason: "Transfer-Encoding in HTTP/1.0")
            }
            guard framing.transferCodings.count == 1, Self.equalsIgnoringCase(framing.transferCodings[0], "chunked")
            else {
                throw HTTPParseError(status: 400, reason: "unsupported transfer coding")
            }
            chunked = true
        } else if !framing.contentLengths.isEmpty {
            guard framing.contentLengths.count == 1 else {
                throw HTTPParseError(status: 400, reason: "more than one Content-Length")
            }
            let text = framing.contentLengths[0]
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = Int(text)
            else { throw HTTPParseError(status: 400, reason: "malformed Content-Length") }
            guard value <= limits.maxBodyBytes else {
                throw HTTPParseError(status: 413, reason: "body larger than \(limits.maxBodyBytes) bytes")
            }
            contentLength = value
        }
        var expectsContinue = false
        if let expect = framing.expect {
            guard Self.equalsIgnoringCase(expect, "100-continue") else {
                throw HTTPParseError(status: 417, reason: "unsupported expectation")
            }
            expectsContinue = request.version == .http11 && (chunked || contentLength > 0)
        }
        request.keepAlive = request.version == .http11 && !framing.connectionClose
        return Head(request: request, chunked: chunked, contentLength: contentLength, expectsContinue: expectsContinue)
    }

    private static let http11 = Array("HTTP/1.1".utf8)
    private static let http10 = Array("HTTP/1.0".utf8)
    private static let httpPrefix = Array("HTTP/".utf8)

    private static func parseRequestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPRequest {
        guard let firstSpace = line.firstIndex(of: 0x20), let lastSpace = line.lastIndex(of: 0x20),
            firstSpace < lastSpace
        else { throw HTTPParseError(status: 400, reason: "malformed request line") }
        let method = line[..<firstSpace]
        let target = line[(firstSpace + 1)..<lastSpace]
        let versionText = line[(lastSpace + 1)...]
        guard !method.isEmpty, method.allSatisfy(isTokenCharacter) else {
            throw HTTPParseError(status: 400, reason: "malformed request line")
        }
        let version: HTTPVersion
        if versionText.elementsEqual(http11) {
            version = .http11
        } else if versionText.elementsEqual(http10) {
            version = .http10
        } else if versionText.count == 8, versionText.starts(with: httpPrefix) {
            throw HTTPParseError(status: 505, reason: "HTTP version not supported")
        } else {
            throw HTTPParseError(status: 400, reason: "malformed request line")
        }
        guard let first = target.first, first == UInt8(ascii: "/") || (target.count == 1 && first == UInt8(ascii: "*")),
            target.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw HTTPParseError(status: 400, reason: "malformed request target") }
        let query = target.firstIndex(of: UInt8(ascii: "?"))
        return HTTPRequest(
            method: String(decoding: method, as: UTF8.self),
            path: String(decoding: target[..<(query ?? target.endIndex)], as: UTF8.self),
            query: query.map { String(decoding: target[($0 + 1)...], as: UTF8.self) },
            version: version
        )
    }

    private static func parseField(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (name: String, value: String) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
            line[..<colon].allSatisfy(isTokenCharacter)
        else { throw HTTPParseError(status: 400, reason: "malformed header field") }
        var value = line[(colon + 1)...]
        guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw HTTPParseError(status: 400, reason: "invalid character in header value")
        }
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        return (String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    static func equalsIgnoringCase(_ text: String, _ lowercase: String) -> Bool {
        var text = text
        var lowercase = lowercase
        return text.withUTF8 { left in
            lowercase.withUTF8 { right in
                guard left.count == right.count else { return false }
                for index in 0..<left.count {
                    let byte = left[index]
                    if (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) != right[index] { return false }
                }
                return true
            }
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's optional white space).
    func trimmingASCIIWhitespace() -> String {
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
            let last = bytes.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
