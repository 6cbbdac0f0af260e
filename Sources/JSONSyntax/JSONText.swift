/// JSON text written as bytes, for the lines the process writes on hot paths (each push of the log
/// sender, each log line): no Foundation encoder, no intermediate `String`s.
public enum JSONText {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `text` as a JSON string literal, quotes included: `"` and `\` escaped, control
    /// characters as `\n`, `\r`, `\t` or `\u00XX`, everything else as its UTF-8 bytes.
    public static func appendQuoted(_ text: some StringProtocol, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case ..<0x20:
                bytes += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")]
                bytes += [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0f)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `"key":` followed by `value` as a string literal, after a comma unless `first`.
    public static func appendField(
        _ key: StaticString, _ value: some StringProtocol, to bytes: inout [UInt8], first: Bool = false
    ) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes += [UInt8(ascii: "\""), UInt8(ascii: ":")]
        appendQuoted(value, to: &bytes)
    }
}
