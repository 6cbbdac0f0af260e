import Foundation
import Testing

@testable import JSONSyntax

@Suite("JSON text")
struct JSONTextTests {
    /// Whatever the text (quotes, backslashes, control characters, non-ASCII), a JSON parser reads
    /// back exactly the text written.
    @Test(arguments: ["plain", #"a "quoted" \ path"#, "line\nbreak\r\ttab\u{01}\u{1f}", "Café 🚲 ✓", ""])
    func quotedTextReadsBackUnchanged(_ text: String) throws {
        var bytes = Array("[".utf8)
        JSONText.appendQuoted(text, to: &bytes)
        bytes.append(UInt8(ascii: "]"))
        let parsed = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String]
        #expect(parsed == [text])
    }

    /// A slice of a longer text is quoted alone, escapes at its very start and end included.
    @Test func quotedSubstringReadsBackUnchanged() throws {
        let whole = "xx\"edge\u{07}and\\\"yy"
        let slice = whole.dropFirst(2).dropLast(2)
        var bytes = Array("[".utf8)
        JSONText.appendQuoted(slice, to: &bytes)
        bytes.append(UInt8(ascii: "]"))
        let parsed = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String]
        #expect(parsed == [String(slice)])
        #expect(String(decoding: bytes, as: UTF8.self) == #"["\"edge\u0007and\\\""]"#)
    }

    @Test func fieldsMakeAnObject() throws {
        var bytes = Array("{".utf8)
        JSONText.appendField("a", "1", to: &bytes, first: true)
        JSONText.appendField("b.c", "x\"y", to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        let parsed = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String]
        #expect(parsed == ["a": "1", "b.c": "x\"y"])
    }
}
