import Foundation
import Testing

@testable import JSONSyntax

@Suite("JSON parser")
struct JSONParserTests {
    private func parse(_ text: String, depth: Int = 64) throws -> ParsedJSON {
        try JSONParser.parse(Array(text.utf8), maximumDepth: depth)
    }

    @Test func readsEveryKindOfValue() throws {
        let text = #" { "a" : [1, -2.5, 3e2, 0, -0.0, 1E-2], "b": {"c": null, "d": true, "e": false}, "s": "x" } "#
        let expected: ParsedJSON = .object([
            "a": .array([.number(1), .number(-2.5), .number(300), .number(0), .number(-0.0), .number(0.01)]),
            "b": .object(["c": .null, "d": .bool(true), "e": .bool(false)]),
            "s": .string("x"),
        ])
        #expect(try parse(text) == expected)
        #expect(try parse("[]") == .array([]))
        #expect(try parse("{}") == .object([:]))
        #expect(try parse("\"top\"") == .string("top"))
        #expect(try parse("\n42\t") == .number(42))
    }

    /// Escapes and non-ASCII text read as Foundation's parser reads them.
    @Test(arguments: [
        #""plain""#, #""q\"uote\\back\/slash""#, #""\b\f\n\r\t""#, #""\u00e9\u20AC\ud83d\udeb2""#, #""Café 🚲""#,
        #""""#,
    ])
    func stringsReadAsFoundationReadsThem(_ text: String) throws {
        let foundation = try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed) as? String
        #expect(try parse(text) == .string(try #require(foundation)))
    }

    /// What RFC 8259 does not allow is refused, with the place.
    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "{a:1}", "{'a':1}", "01", "1.", ".5", "-", "1e", "+1", "NaN", "Infinity",
        "tru", "nul", "[1 2]", "{\"a\" 1}", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"", "\"\\ud83d\"",
        "\"\\udeb2\"", "\"tab\tinside\"", "1e400", "[1] [2]", "/* c */ 1",
    ])
    func invalidTextIsRefused(_ text: String) {
        #expect(throws: JSONParseError.self) { try parse(text) }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xC3, 0x22]) }
    }

    /// Nesting is bounded: a hostile body cannot recurse the parser off its thread's stack.
    @Test func nestingIsBounded() throws {
        #expect(try parse(String(repeating: "[", count: 4) + String(repeating: "]", count: 4), depth: 4) != .null)
        #expect(throws: JSONParseError.self) {
            try parse(String(repeating: "[", count: 5) + String(repeating: "]", count: 5), depth: 4)
        }
        #expect(throws: JSONParseError.self) { try parse(String(repeating: "[", count: 100_000)) }
        #expect(throws: JSONParseError.self) { try parse(String(repeating: "{\"a\":", count: 100_000)) }
    }

    /// A key given twice keeps its last value.
    @Test func aRepeatedKeyKeepsItsLastValue() throws {
        #expect(try parse(#"{"a":1,"a":2}"#) == .object(["a": .number(2)]))
    }

    /// The error says where the text went wrong.
    @Test func errorsNameTheirOffset() {
        do {
            _ = try JSONParser.parse(Array("[1, x]".utf8))
            Issue.record("parsed")
        } catch {
            #expect(error.offset == 4)
        }
    }
}
