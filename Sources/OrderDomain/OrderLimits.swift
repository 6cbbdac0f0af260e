public import FoundationEssentials

/// The bounds every order input is held to; the API documents the same numbers.
public enum OrderLimits {
    public static let numberLength = 1...32
    public static let nameLength = 1...100
    public static let identifierLength = 1...64
    public static let addressLength = 1...500
    public static let noteLength = 0...500
    public static let reasonLength = 0...500
    public static let itemCount = 1...100
    public static let quantity = 1...999
    public static let phoneLength = 5...32
    /// How far ahead an ETA may lie; further is a typo, not a delivery.
    public static let estimatedArrivalHorizon: TimeInterval = 48 * 3600
    /// How far before the order's creation an ETA may lie, for clocks that disagree a little.
    public static let estimatedArrivalSkew: TimeInterval = 10 * 60
    /// The accuracy radius a position may state, in metres.
    public static let positionAccuracy: ClosedRange<Double> = 0...10_000
    /// How far ahead of the server's clock a position's `recordedAt` may lie.
    public static let positionClockSkew: TimeInterval = 30
    /// How old a position may be when it arrives: older ones say where the rider was, not is.
    public static let positionMaximumAge: TimeInterval = 300
    /// The payment methods the API accepts.
    public static let paymentMethods: Set<String> = ["card", "cash", "wallet", "voucher", "other"]

    /// The rule of a merchant's, a rider's or a customer's id: 1 to 64 code points, none of them white
    /// space or a control character. Counted in code points, as JSON Schema's `maxLength` counts, so
    /// that the API document can state the rule exactly.
    public static func isIdentifier(_ value: String) -> Bool {
        identifierLength.contains(value.unicodeScalars.count)
            && !value.unicodeScalars.contains {
                $0.properties.isWhitespace || $0.properties.generalCategory == .control
            }
    }
}

/// Collects every broken field rule of one input, so that a client learns all of them at once.
struct FieldChecker {
    private(set) var issues: [FieldIssue] = []

    mutating func fail(_ field: String, _ problem: String) {
        issues.append(FieldIssue(field: field, problem: problem))
    }

    /// Checks a required text field; returns it when it is present and well-formed.
    mutating func text(_ value: String?, _ field: String, length: ClosedRange<Int>) -> String? {
        guard let value else {
            fail(field, "is required")
            return nil
        }
        return optionalText(value, field, length: length)
    }

    /// Checks an optional text field: length in characters, and no control characters.
    mutating func optionalText(_ value: String?, _ field: String, length: ClosedRange<Int>) -> String? {
        guard let value else { return nil }
        let trimmed = value.trimmingWhitespace()
        if !length.contains(trimmed.count) {
            fail(
                field,
                trimmed.isEmpty
                    ? "must not be empty" : "must be \(length.lowerBound) to \(length.upperBound) characters")
            return nil
        }
        if trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            fail(field, "must not contain control characters")
            return nil
        }
        return trimmed
    }

    /// `value` when it is present and keeps its rule; otherwise `nil` and an issue: `is required`
    /// (when it is), or `problem`.
    private mutating func check<Value>(
        _ value: Value?, _ field: String, required: Bool = true, _ problem: String, _ keepsRule: (Value) -> Bool
    ) -> Value? {
        guard let value else {
            if required { fail(field, "is required") }
            return nil
        }
        guard keepsRule(value) else {
            fail(field, problem)
            return nil
        }
        return value
    }

    /// Checks a required identifier (`OrderLimits.isIdentifier`).
    mutating func identifier(_ value: String?, _ field: String) -> String? {
        check(
            value, field, "must be 1 to 64 characters, without spaces or control characters", OrderLimits.isIdentifier)
    }

    /// A phone number: digits with the usual separators and an optional leading `+`.
    mutating func phone(_ value: String?, _ field: String, required: Bool) -> String? {
        check(value, field, required: required, "must be a phone number of 5 to 32 characters") { value in
            let allowed = Set("0123456789+-() ./")
            return OrderLimits.phoneLength.contains(value.count) && value.allSatisfy(allowed.contains)
                && value.filter(\.isASCIIDigit).count >= 5 && !value.dropFirst().contains("+")
        }
    }

    /// A BCP 47-shaped language tag: `en`, `de-DE`, `zh-Hans`, `zh-Hans-CN`.
    mutating func locale(_ value: String?, _ field: String) -> String? {
        check(value, field, "must be a language tag such as en or de-DE") { value in
            let parts = value.split(separator: "-", omittingEmptySubsequences: false)
            let language = parts.first.map { (2...3).contains($0.count) && $0.allSatisfy(\.isASCIILetter) } ?? false
            let rest = parts.dropFirst().allSatisfy {
                (2...8).contains($0.count) && $0.allSatisfy(\.isASCIIAlphanumeric)
            }
            return language && rest && value.count <= 35
        }
    }

    /// A point on Earth: latitude −90…90 and longitude −180…180, both required. The messages name the
    /// rule, never the value: a coordinate says where someone lives or is.
    /// - Parameter prefix: the fields' path before `latitude` and `longitude` (`destination.`).
    mutating func coordinate(latitude: Double?, longitude: Double?, prefix: String) -> Coordinate? {
        let latitude = check(latitude, prefix + "latitude", "must be a number from -90 to 90") {
            $0.isFinite && abs($0) <= 90
        }
        let longitude = check(longitude, prefix + "longitude", "must be a number from -180 to 180") {
            $0.isFinite && abs($0) <= 180
        }
        guard let latitude, let longitude else { return nil }
        return Coordinate(latitude: latitude, longitude: longitude)
    }

    /// An ETA no earlier than the order's creation (less a small skew) and no later than the horizon.
    mutating func estimatedArrival(_ value: Date?, _ field: String, createdAt: Date, now: Date) -> Date? {
        guard let value else {
            fail(field, "is required")
            return nil
        }
        guard value >= createdAt.addingTimeInterval(-OrderLimits.estimatedArrivalSkew) else {
            fail(field, "must not be before the order was placed")
            return nil
        }
        guard value <= now.addingTimeInterval(OrderLimits.estimatedArrivalHorizon) else {
            fail(field, "must be within 48 hours")
            return nil
        }
        return value
    }

    /// Throws `validation_failed` naming every issue, if there is any.
    func finish() throws(OrderError) {
        guard issues.isEmpty else {
            let list = issues.map(\.description).joined(separator: "; ")
            throw OrderError(.validationFailed, "invalid fields: \(list)", fieldIssues: issues)
        }
    }
}

extension String {
    /// The string without leading and trailing white space (spaces, tabs, line breaks).
    func trimmingWhitespace() -> String {
        let start = firstIndex(where: { !$0.isWhitespace }) ?? endIndex
        let end = lastIndex(where: { !$0.isWhitespace }).map(index(after:)) ?? start
        return String(self[start..<max(start, end)])
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    var isASCIILetter: Bool { isASCII && isLetter }
    var isASCIIAlphanumeric: Bool { isASCIIDigit || isASCIILetter }
}
