public import FoundationEssentials

/// UTC times as RFC 3339 text with milliseconds (`2026-12-06T01:52:11.123Z`), the form of every time
/// in the API and the log, written by arithmetic: Foundation's `ISO8601FormatStyle` cost several
/// microseconds a time, and an order's answer holds several times.
public enum RFC3339Time {
    /// The time, its milliseconds truncated as `ISO8601FormatStyle` truncates them. It is first
    /// rounded to the microsecond, so that a time made from whole milliseconds (as the store keeps
    /// them) is written with exactly those, whatever the binary fraction's error.
    public static func format(_ date: Date) -> String {
        let microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let milliseconds = floorDivision(microseconds, 1000).quotient
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = civilDate(daysSince1970: days)
        var text = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int64, _ width: Int, at offset: Int) {
            var rest = value
            for position in stride(from: offset + width - 1, through: offset, by: -1) {
                text[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
        }
        put(year, 4, at: 0)
        text[4] = UInt8(ascii: "-")
        put(month, 2, at: 5)
        text[7] = UInt8(ascii: "-")
        put(day, 2, at: 8)
        text[10] = UInt8(ascii: "T")
        put(millisecondOfDay / 3_600_000, 2, at: 11)
        text[13] = UInt8(ascii: ":")
        put(millisecondOfDay / 60_000 % 60, 2, at: 14)
        text[16] = UInt8(ascii: ":")
        put(millisecondOfDay / 1000 % 60, 2, at: 17)
        text[19] = UInt8(ascii: ".")
        put(millisecondOfDay % 1000, 3, at: 20)
        text[23] = UInt8(ascii: "Z")
        return String(decoding: text, as: UTF8.self)
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
    private static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
