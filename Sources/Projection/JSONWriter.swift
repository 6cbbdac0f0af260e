import JSONSyntax

/// Writes JSON bytes directly, with object keys in the order the caller gives them.
///
/// Payloads are written by hand rather than through `JSONEncoder` for two reasons: equal states must
/// give equal bytes (keys sorted, numbers in one fixed format), and building a payload must cost a
/// few microseconds. Callers write keys in ascending byte order; debug builds check it.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false
    #if DEBUG
        private var lastKeys: [String?] = []
    #endif

    init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        #if DEBUG
            lastKeys.append(nil)
        #endif
    }

    mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
        #if DEBUG
            lastKeys.removeLast()
        #endif
    }

    /// Writes `"key":`; the value written next belongs to it.
    mutating func key(_ key: StaticString) {
        #if DEBUG
            let text = key.description
            if let previous = lastKeys[lastKeys.count - 1] {
                precondition(previous.utf8.lexicographicallyPrecedes(text.utf8), "JSON keys out of order: \(text)")
            }
            lastKeys[lastKeys.count - 1] = text
        #endif
        separate()
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func string(_ value: String) {
        separate()
        JSONText.appendQuoted(value, to: &bytes)
        needsComma = true
    }

    mutating func integer(_ value: Int64) {
        separate()
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
        needsComma = true
    }

    mutating func boolean(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    /// Whole numbers without a fraction (`1`, not `1.0`); others in Swift's shortest round-trip form.
    mutating func number(_ value: Double) {
        precondition(value.isFinite, "JSON has no representation for \(value)")
        if value == value.rounded(), abs(value) < 1e15 {
            integer(Int64(value))
        } else {
            separate()
            bytes.append(contentsOf: value.description.utf8)
            needsComma = true
        }
    }

    /// One member, its key and value in one call.
    mutating func member(_ key: StaticString, _ value: String) {
        self.key(key)
        string(value)
    }

    mutating func member(_ key: StaticString, _ value: Int64) {
        self.key(key)
        integer(value)
    }

    mutating func member(_ key: StaticString, _ value: Double) {
        self.key(key)
        number(value)
    }

    mutating func member(_ key: StaticString, _ value: Bool) {
        self.key(key)
        boolean(value)
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }
}
