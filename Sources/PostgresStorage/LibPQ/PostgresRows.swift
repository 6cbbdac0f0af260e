internal import CLibPQ
package import Storage

/// A statement's result, copied out of libpq at once: its rows as `DatabaseValue`s, read by column
/// name (`DatabaseRow`), and how many rows the statement changed.
package struct PostgresRows: Sendable {
    package let query: String
    /// Rows an `INSERT`, `UPDATE` or `DELETE` changed (or a `SELECT` returned).
    package let affected: Int
    private let columns: [String: Int]
    private let values: [[DatabaseValue]]

    init(_ result: OpaquePointer, query: String) {
        self.query = query
        affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        var columns: [String: Int] = [:]
        var types: [UInt32] = []
        for column in 0..<PQnfields(result) {
            columns[String(cString: PQfname(result, column))] = Int(column)
            types.append(PQftype(result, column))
        }
        self.columns = columns
        values = (0..<PQntuples(result)).map { row in
            types.indices.map { column in
                let index = Int32(column)
                guard PQgetisnull(result, row, index) == 0 else { return .null }
                let length = Int(PQgetlength(result, row, index))
                let text = PQgetvalue(result, row, index).withMemoryRebound(to: UInt8.self, capacity: length) {
                    String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                }
                return Self.value(text, type: types[column])
            }
        }
    }

    package var count: Int { values.count }
    package var isEmpty: Bool { values.isEmpty }
    package var first: PostgresRow? { values.isEmpty ? nil : self[0] }

    package subscript(_ index: Int) -> PostgresRow {
        PostgresRow(query: query, columns: columns, values: values[index])
    }

    /// Every row through `transform`.
    package func map<T>(_ transform: (PostgresRow) throws -> T) rethrows -> [T] {
        try values.indices.map { try transform(self[$0]) }
    }

    /// Type OIDs of `pg_type` that arrive as text and mean something else.
    private enum TypeOID {
        static let boolean: UInt32 = 16
        static let bytea: UInt32 = 17
        static let integers: Set<UInt32> = [20, 21, 23, 26]
        static let reals: Set<UInt32> = [700, 701, 1700]
    }

    /// A value in libpq's text format as what it holds: integers, reals, bytes (`\x` and hex
    /// digits), booleans as 0 or 1, anything else as text.
    private static func value(_ text: String, type: UInt32) -> DatabaseValue {
        if TypeOID.integers.contains(type), let number = Int64(text) { return .integer(number) }
        if TypeOID.reals.contains(type), let number = Double(text) { return .real(number) }
        if type == TypeOID.boolean { return .integer(text == "t" ? 1 : 0) }
        if type == TypeOID.bytea, text.hasPrefix("\\x") { return .blob(hexBytes(text.utf8.dropFirst(2))) }
        return .text(text)
    }

    private static func hexBytes(_ digits: Substring.UTF8View) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            let nibble: UInt8 =
                switch digit {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
                default: digit - UInt8(ascii: "A") + 10
                }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}

/// One row of `PostgresRows`.
package struct PostgresRow: DatabaseRow {
    package let query: String
    fileprivate let columns: [String: Int]
    fileprivate let values: [DatabaseValue]

    package subscript(_ name: String) -> DatabaseValue {
        get throws(StorageError) {
            guard let index = columns[name] else { throw StorageError("the query has no column \(name): \(query)") }
            return values[index]
        }
    }
}
