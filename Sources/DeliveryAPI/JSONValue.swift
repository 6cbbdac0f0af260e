import Foundation
import JSONSyntax
import Telemetry

/// A JSON document as the API reads request bodies and writes responses.
///
/// Reading goes through `JSONParser` (strict RFC 8259); writing is ours so that output is
/// deterministic (object keys sorted) and projection bytes can be embedded verbatim (`fragment`).
enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
    /// Already-encoded JSON, written as is: the Live Activity state exactly as the pusher sends it.
    case fragment([UInt8])

    /// The deepest nesting of arrays and objects a request body may have; no body of this API needs
    /// more than a handful.
    static let maximumDepth = 32

    /// Parses a request body.
    /// - Throws: `APIError.invalidJSON` naming what is wrong.
    static func parse(_ bytes: [UInt8]) throws(APIError) -> JSONValue {
        // Parsing recurses once per level: a body nested a few hundred deep overflowed a handler
        // thread's stack and stopped the process. The parser refuses the 33rd level before entering it.
        do {
            return JSONValue(try JSONParser.parse(bytes, maximumDepth: Self.maximumDepth))
        } catch {
            throw .invalidJSON("the body is not valid JSON: \(error)")
        }
    }

    init(_ parsed: ParsedJSON) {
        switch parsed {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .number(let value): self = .number(value)
        case .string(let value): self = .string(value)
        case .array(let values): self = .array(values.map(JSONValue.init))
        case .object(let members): self = .object(members.mapValues(JSONValue.init))
        }
    }

    /// The UTF-8 bytes of this value, keys sorted.
    var encoded: [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(into: &output)
        return output
    }

    private func write(into output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let value):
            if value.rounded() == value, abs(value) < 9e15 {
                output.append(contentsOf: String(Int64(value)).utf8)
            } else if value.isFinite {
                output.append(contentsOf: "\(value)".utf8)
            } else {
                output.append(contentsOf: "null".utf8)
            }
        case .string(let value): Self.writeString(value, into: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                value.write(into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            // Sorted as pairs: sorting the keys and looking each up again hashed every key of every answer.
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        case .fragment(let bytes): output.append(contentsOf: bytes)
        }
    }

    private static func writeString(_ value: String, into output: inout [UInt8]) {
        JSONText.appendQuoted(value, to: &output)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue {
    /// A string, or `null` when absent: optional fields of responses.
    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }

    /// An RFC 3339 UTC time with milliseconds, the form every time in the HTTP API takes.
    static func time(_ date: Date) -> JSONValue { .string(RFC3339.format(date)) }

    static func time(_ date: Date?) -> JSONValue { date.map(time) ?? .null }
}

/// RFC 3339 times: what the HTTP API reads and writes.
enum RFC3339 {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    static func format(_ date: Date) -> String { RFC3339Time.format(date) }

    /// Parses `2026-12-02T12:30:00Z`, with or without fractional seconds, `Z` or a numeric offset.
    static func parse(_ text: String) -> Date? {
        (try? withoutFraction.parse(text)) ?? (try? withFraction.parse(text))
    }
}
