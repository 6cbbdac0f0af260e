/// JSON text written as bytes, for the lines the process writes on hot paths (each push of the log
/// sender, each log line, each response): no Foundation encoder, no intermediate `String`s.
///
/// The entry points take concrete types (`String`, `Substring`), not `some StringProtocol`:
/// a generic function called from another module runs unspecialized, each byte through a witness
/// table, and quoting the fields of responses that way was 6 % of the process's CPU under load.
public enum JSONText {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `text` as a JSON string literal, quotes included: `"` and `\` escaped, control
    /// characters as `\n`, `\r`, `\t` or `\u00XX`, everything else as its UTF-8 bytes.
    public static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { appendQuoted(utf8: $0, to: &bytes) }
    }

    public static func appendQuoted(_ text: Substring, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { appendQuoted(utf8: $0, to: &bytes) }
    }

    /// Copies runs of bytes that need no escape at once; only `"`, `\` and control characters
    /// stop a run.
    private static func appendQuoted(utf8 text: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + text.count + 2)
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        for index in 0..<text.count {
            let byte = text[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart..<index]))
            appendEscaped(byte, to: &bytes)
            runStart = index + 1
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart...]))
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(hexDigits[Int(byte >> 4)])
            bytes.append(hexDigits[Int(byte & 0x0f)])
        }
    }

    /// Appends `"key":` followed by `value` as a string literal, after a comma unless `first`.
    public static func appendField(_ key: StaticString, _ value: String, to bytes: inout [UInt8], first: Bool = false) {
        appendKey(key, to: &bytes, first: first)
        appendQuoted(value, to: &bytes)
    }

    public static func appendField(
        _ key: StaticString, _ value: Substring, to bytes: inout [UInt8], first: Bool = false
    ) {
        appendKey(key, to: &bytes, first: first)
        appendQuoted(value, to: &bytes)
    }

    private static func appendKey(_ key: StaticString, to bytes: inout [UInt8], first: Bool) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }
}
