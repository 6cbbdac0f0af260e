import Foundation
import OrderDomain

/// Reads typed fields out of a JSON object and notes every field of the wrong type by its path.
///
/// Missing fields read as `nil` (the domain says which are required); `null` is a value of the wrong
/// type, as the API document says (no request field is nullable); unknown fields are ignored, as the
/// API promises. Type errors collect in `issues`, so one answer lists them all.
struct FieldReader {
    private(set) var issues: [FieldIssue] = []
    /// The path of the object being read, with its dot (`customer.`), empty at the top: fields are
    /// named relative to it and reported by their whole path.
    private var prefix = ""

    mutating func fail(_ field: String, _ problem: String) {
        issues.append(FieldIssue(field: prefix + field, problem: problem))
    }

    /// `read`'s result, its fields named under `name` (`items[2].` + `price`).
    mutating func within<T>(_ name: String, _ read: (inout FieldReader) -> T) -> T {
        let outer = prefix
        prefix += name + "."
        defer { prefix = outer }
        return read(&self)
    }

    /// The object at `key` as `read` reads it, its fields named under `key` (`customer.phone`);
    /// `nil` when absent, and an issue when not an object.
    mutating func nested<T>(
        _ object: [String: JSONValue], _ key: String, _ read: (inout FieldReader, [String: JSONValue]) -> T
    ) -> T? {
        guard let members = self.object(object, key) else { return nil }
        return within(key) { read(&$0, members) }
    }

    /// The request body as an object.
    /// - Throws: `invalid_json` when the body is not a JSON object.
    static func object(_ body: [UInt8]) throws(APIError) -> [String: JSONValue] {
        guard case .object(let members) = try JSONValue.parse(body) else {
            throw .invalidJSON("the body must be a JSON object")
        }
        return members
    }

    /// The field `key` of `object` as `extract` reads it: `nil` when absent, and an issue (`must be …`)
    /// when present with another type, named `path` (default `key`) under the object being read.
    private mutating func field<T>(
        _ object: [String: JSONValue], _ key: String, path: String?, mustBe type: String,
        _ extract: (JSONValue) -> T?
    ) -> T? {
        guard let value = object[key] else { return nil }
        guard let typed = extract(value) else {
            fail(path ?? key, "must be \(type)")
            return nil
        }
        return typed
    }

    mutating func string(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> String? {
        field(object, key, path: path, mustBe: "a string") { if case .string(let value) = $0 { value } else { nil } }
    }

    mutating func number(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> Double? {
        field(object, key, path: path, mustBe: "a number") { if case .number(let value) = $0 { value } else { nil } }
    }

    mutating func integer(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> Int? {
        guard let value = number(object, key, path: path) else { return nil }
        guard value.rounded() == value, abs(value) < 1e15 else {
            fail(path ?? key, "must be a whole number")
            return nil
        }
        return Int(value)
    }

    /// The largest integer a JSON number (an IEEE double) holds exactly: 2^53 − 1.
    static let largestExactInteger: Int64 = 9_007_199_254_740_991

    /// A whole number within `range`, checked before any conversion (`Int64(1e300)` would trap).
    mutating func wholeNumber(_ value: JSONValue, path: String, in range: ClosedRange<Int64>) -> Int64? {
        guard case .number(let number) = value, number.isFinite, number.rounded() == number,
            number >= Double(range.lowerBound), number <= Double(range.upperBound)
        else {
            fail(path, "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return Int64(number)
    }

    mutating func time(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> Date? {
        guard let text = string(object, key, path: path) else { return nil }
        guard let date = RFC3339.parse(text) else {
            fail(path ?? key, "must be an RFC 3339 time such as 2026-12-02T12:30:00Z")
            return nil
        }
        return date
    }

    mutating func object(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> [String: JSONValue]? {
        field(object, key, path: path, mustBe: "an object") {
            if case .object(let members) = $0 { members } else { nil }
        }
    }

    mutating func array(_ object: [String: JSONValue], _ key: String, path: String? = nil) -> [JSONValue]? {
        field(object, key, path: path, mustBe: "an array") { if case .array(let values) = $0 { values } else { nil } }
    }

    /// A required field that the domain does not check itself.
    /// A merchant's, rider's or customer's id, when present: `OrderLimits.isIdentifier` or an issue.
    mutating func identifier(_ object: [String: JSONValue], _ key: String) -> String? {
        guard let value = string(object, key) else { return nil }
        guard OrderLimits.isIdentifier(value) else {
            fail(key, "must be 1 to 64 characters, without spaces or control characters")
            return nil
        }
        return value
    }

    mutating func require<T>(_ value: T?, _ field: String) -> T? {
        if value == nil, !issues.contains(where: { $0.field == prefix + field }) { fail(field, "is required") }
        return value
    }

    /// Throws `validation_failed` with every issue noted so far, plus `more` from the domain.
    func finish(adding more: [FieldIssue] = []) throws(APIError) {
        let all = issues + more
        guard all.isEmpty else { throw .validationFailed(all) }
    }
}
