/// Removes contact and payment details from free text before it can appear in a push.
///
/// Merchants and riders type names and notes, and some type a phone number into a shop name.
/// The rules are deliberately broad, because a false positive costs a few characters of a name
/// and a false negative leaks a customer's or rider's data to a Lock Screen:
/// - any run of digits, in any script, that holds 7 or more digits once separators (space, `-`, `.`,
///   `/`, parentheses, a leading `+`) are ignored: phone numbers, card numbers, IBAN digits;
/// - anything shaped like an e-mail address (`local@domain`).
///
/// Each removed span becomes `mask`. The result also has its white space collapsed.
public enum TextScrubber {
    /// What a removed span is replaced with.
    public static let mask = "•••"

    /// The scrubbed text.
    public static func scrub(_ text: String) -> String {
        if isPlainASCII(text) { return text }
        let scalars = Array(text.unicodeScalars)
        var removed = [Bool](repeating: false, count: scalars.count)
        markDigitRuns(scalars, &removed)
        markEmailAddresses(scalars, &removed)

        var result = String.UnicodeScalarView()
        var index = 0
        var pendingSpace = false
        while index < scalars.count {
            if removed[index] {
                if pendingSpace && !result.isEmpty { result.append(" ") }
                pendingSpace = false
                result.append(contentsOf: mask.unicodeScalars)
                while index < scalars.count && removed[index] { index += 1 }
                continue
            }
            let scalar = scalars[index]
            if isWhitespaceOrControl(scalar) {
                pendingSpace = true
            } else {
                if pendingSpace && !result.isEmpty { result.append(" ") }
                pendingSpace = false
                result.append(scalar)
            }
            index += 1
        }
        return String(result)
    }

    /// True for ASCII text without digits, `@`, control characters or runs of spaces: most names,
    /// which then need no further work. Unicode property look-ups are the cost of scrubbing.
    private static func isPlainASCII(_ text: String) -> Bool {
        var previousWasSpace = true
        for byte in text.utf8 {
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "@"),
                !(byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            else { return false }
            let isSpace = byte == UInt8(ascii: " ")
            if isSpace && previousWasSpace { return false }
            previousWasSpace = isSpace
        }
        return !previousWasSpace || text.isEmpty
    }

    private static func isWhitespaceOrControl(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return scalar.value <= 0x20 || scalar.value == 0x7F }
        return scalar.properties.isWhitespace || scalar.properties.generalCategory == .control
    }

    private static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return scalar.value >= 0x30 && scalar.value <= 0x39 }
        return scalar.properties.numericType == .decimal
    }

    private static func isDigitSeparator(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case " ", "-", ".", "/", "(", ")", "+", "\u{00A0}", "\u{2010}", "\u{2011}", "\u{2012}", "\u{2013}", "\u{2212}":
            true
        default: false
        }
    }

    /// Marks every run of digits and separators that holds 7 or more digits.
    private static func markDigitRuns(_ scalars: [Unicode.Scalar], _ removed: inout [Bool]) {
        var index = 0
        while index < scalars.count {
            guard isDigit(scalars[index]) || (scalars[index] == "+" || scalars[index] == "(") else {
                index += 1
                continue
            }
            var end = index
            var digits = 0
            var lastDigit = index
            while end < scalars.count, isDigit(scalars[end]) || isDigitSeparator(scalars[end]) {
                if isDigit(scalars[end]) {
                    digits += 1
                    lastDigit = end
                }
                end += 1
            }
            if digits >= 7 {
                for position in index...lastDigit { removed[position] = true }
            }
            index = max(end, index + 1)
        }
    }

    /// Marks `local@domain` spans: the local part and the domain around each `@`.
    private static func markEmailAddresses(_ scalars: [Unicode.Scalar], _ removed: inout [Bool]) {
        func isAddressCharacter(_ scalar: Unicode.Scalar) -> Bool {
            !isWhitespaceOrControl(scalar) && scalar != "@" && scalar != "," && scalar != ";" && scalar != "<"
                && scalar != ">" && scalar != "(" && scalar != ")" && scalar != "\"" && scalar != "'"
        }
        for at in scalars.indices where scalars[at] == "@" {
            var start = at
            while start > 0, isAddressCharacter(scalars[start - 1]) { start -= 1 }
            var end = at + 1
            while end < scalars.count, isAddressCharacter(scalars[end]) { end += 1 }
            guard start < at, end > at + 1 else { continue }
            for position in start..<end { removed[position] = true }
        }
    }
}
