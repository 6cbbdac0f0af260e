public import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// A server's `Retry-After` (RFC 9110 §10.2.3): seconds to wait, or the HTTP date to wait until.
/// Webhook receivers and FCM send it.
public enum RetryAfter {
    /// The seconds `value` asks to wait from `now`; `nil` when it is neither form.
    public static func seconds(_ value: Substring, now: Date) -> Int? {
        var trimmed = String(value.drop { $0.isWhitespace })
        while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
        if let delay = Int(trimmed) { return max(0, delay) }
        guard let date = httpDate(trimmed) else { return nil }
        return max(0, Int(date.timeIntervalSince(now).rounded(.up)))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The IMF-fixdate form every HTTP/1.1 sender must use: `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT", let day = Int(parts[1]),
            let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3])
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (1970...9999).contains(year), (0...23).contains(clock[0]),
            (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(clock[0])
        fields.tm_min = Int32(clock[1])
        fields.tm_sec = Int32(clock[2])
        return Date(timeIntervalSince1970: TimeInterval(timegm(&fields)))
    }
}
