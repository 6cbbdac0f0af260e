/// A value bound to, or read from, a column, whatever the database.
package enum DatabaseValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// One row of a query's result, read by column name; every backend's rows read the same way.
///
/// A column the query lacks, a NULL where a value is required, a value of another type and an
/// unknown raw value are thrown as `StorageError`, never read as an empty value or a default: they
/// mean the schema and the code drifted apart.
package protocol DatabaseRow {
    /// The query's text, for errors.
    var query: String { get }
    /// The value of column `name`, NULL included; a column the query lacks is thrown.
    subscript(_ name: String) -> DatabaseValue { get throws(StorageError) }
}

extension DatabaseRow {
    // Each checks for NULL itself: a generic helper on this protocol ran unspecialized, building
    // the metadata of `Optional<T>` for every column of every row read (1 % of the CPU under load).
    package func text(_ name: String) throws(StorageError) -> String {
        guard let value = try optionalText(name) else { throw null(name) }
        return value
    }

    package func int(_ name: String) throws(StorageError) -> Int64 {
        guard let value = try optionalInt(name) else { throw null(name) }
        return value
    }

    package func double(_ name: String) throws(StorageError) -> Double {
        guard let value = try optionalDouble(name) else { throw null(name) }
        return value
    }

    package func blob(_ name: String) throws(StorageError) -> [UInt8] {
        guard let value = try optionalBlob(name) else { throw null(name) }
        return value
    }

    /// `nil` for NULL; a value of another type throws.
    package func optionalText(_ name: String) throws(StorageError) -> String? {
        switch try self[name] {
        case .null: return nil
        case .text(let value): return value
        case let other: throw mismatch(name, other, "text")
        }
    }

    package func optionalInt(_ name: String) throws(StorageError) -> Int64? {
        switch try self[name] {
        case .null: return nil
        case .integer(let value): return value
        case let other: throw mismatch(name, other, "an integer")
        }
    }

    package func optionalDouble(_ name: String) throws(StorageError) -> Double? {
        switch try self[name] {
        case .null: return nil
        case .real(let value): return value
        case .integer(let value): return Double(value)
        case let other: throw mismatch(name, other, "a number")
        }
    }

    package func optionalBlob(_ name: String) throws(StorageError) -> [UInt8]? {
        switch try self[name] {
        case .null: return nil
        case .blob(let value): return value
        case let other: throw mismatch(name, other, "a blob")
        }
    }

    /// A text column holding a raw value of `T` (a status, a kind); any other text is thrown.
    package func value<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) throws(StorageError) -> T
    where T.RawValue == String {
        guard let value = try optionalValue(name, as: type) else { throw null(name) }
        return value
    }

    package func optionalValue<T: RawRepresentable>(_ name: String, as type: T.Type = T.self) throws(StorageError) -> T?
    where T.RawValue == String {
        guard let text = try optionalText(name) else { return nil }
        guard let value = T(rawValue: text) else {
            throw StorageError("column \(name) holds \(text), which is no \(T.self): \(query)")
        }
        return value
    }

    private func null(_ name: String) -> StorageError {
        StorageError("column \(name) is NULL: \(query)")
    }

    private func mismatch(_ name: String, _ value: DatabaseValue, _ expected: String) -> StorageError {
        StorageError("column \(name) holds \(value), not \(expected): \(query)")
    }
}
