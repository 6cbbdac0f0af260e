/// A JSON document as read: what request bodies and stored JSON columns decode to.
public enum ParsedJSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([ParsedJSON])
    case object([String: ParsedJSON])
}

/// Why a text is not JSON, and where (a byte offset).
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let reason: String
    public let offset: Int

    public var description: String { "\(reason) at byte \(offset)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes, written for the request path: Foundation's
/// `JSONDecoder` on Linux was a tenth of the CPU a status change cost (a body of a few hundred
/// bytes, and each stored order's items).
///
/// Strict: no comments, trailing commas, leading zeros, `NaN` or single quotes; control characters
/// in strings, invalid UTF-8 and lone surrogates are refused; a number too large for a `Double` is
/// refused rather than read as infinity. A key given twice keeps its last value. Nesting deeper than
/// `maximumDepth` is refused before it could exhaust a thread's stack.
public struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private let maximumDepth: Int

    private init(_ bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// Parses one JSON text (any value at the top, surrounded by whitespace at most).
    public static func parse(_ bytes: [UInt8], maximumDepth: Int = 64) throws(JSONParseError) -> ParsedJSON {
        var parser = JSONParser(bytes, maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected text after the value") }
        return value
    }

    private func failure(_ reason: String) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(JSONParseError) -> ParsedJSON {
        guard index < bytes.count else { throw failure("the text ends where a value should be") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw failure("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("unexpected end of the text") }
        let matches = word.withUTF8Buffer { expected in
            for offset in 0..<count where bytes[index + offset] != expected[offset] { return false }
            return true
        }
        guard matches else { throw failure("unexpected character") }
        index += count
    }

    private mutating func object(depth: Int) throws(JSONParseError) -> ParsedJSON {
        guard depth <= maximumDepth else { throw failure("nested deeper than \(maximumDepth) levels") }
        index += 1  // {
        var members: [String: ParsedJSON] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw failure("expected a key in double quotes")
            }
            let key = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            members[key] = try value(depth: depth)
            skipWhitespace()
            guard index < bytes.count else { throw failure("the text ends inside an object") }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            guard bytes[index] == UInt8(ascii: ",") else { throw failure("expected ',' or '}'") }
            index += 1
            skipWhitespace()
        }
    }

    private mutating func array(depth: Int) throws(JSONParseError) -> ParsedJSON {
        guard depth <= maximumDepth else { throw failure("nested deeper than \(maximumDepth) levels") }
        index += 1  // [
        var elements: [ParsedJSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try value(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw failure("the text ends inside an array") }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            guard bytes[index] == UInt8(ascii: ",") else { throw failure("expected ',' or ']'") }
            index += 1
            skipWhitespace()
        }
    }

    /// A string from its opening quote; plain runs are copied as they are, and checked as UTF-8 once.
    private mutating func string() throws(JSONParseError) -> String {
        index += 1  // "
        var decoded: [UInt8] = []
        var runStart = index
        while true {
            guard index < bytes.count else { throw failure("the text ends inside a string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let text: String?
                if decoded.isEmpty {
                    text = String(validating: bytes[runStart..<index], as: UTF8.self)
                } else {
                    decoded += bytes[runStart..<index]
                    text = String(validating: decoded, as: UTF8.self)
                }
                guard let text else { throw failure("a string is not valid UTF-8") }
                index += 1
                return text
            case UInt8(ascii: "\\"):
                decoded += bytes[runStart..<index]
                index += 1
                try escape(into: &decoded)
                runStart = index
            case ..<0x20:
                throw failure("a control character inside a string must be escaped")
            default:
                index += 1
            }
        }
    }

    /// One escape after its backslash.
    private mutating func escape(into decoded: inout [UInt8]) throws(JSONParseError) {
        guard index < bytes.count else { throw failure("the text ends inside an escape") }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(letter)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hexQuad()
            if (0xD800...0xDBFF).contains(scalar) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw failure("a high surrogate without its low surrogate") }
                index += 2
                let low = try hexQuad()
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw failure("a high surrogate without its low surrogate")
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw failure("a low surrogate without its high surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("an invalid \\u escape") }
            decoded += Array(String(Character(unicode)).utf8)
        default:
            throw failure("an invalid escape")
        }
    }

    private mutating func hexQuad() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("the text ends inside a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("an invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A number, checked against the grammar first, then read by the standard library.
    private mutating func number() throws(JSONParseError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a number needs a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw failure("a number may not start with 0") }
        } else {
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a digit must follow '.'") }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a digit must follow the exponent") }
            skipDigits()
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite else {
            throw JSONParseError(reason: "a number too large", offset: start)
        }
        return value
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }
}
