package import Storage

/// A pooled connection as the store's `SQLSession`: the shared statements, numbered for PostgreSQL
/// and prepared once per connection.
extension PostgresConnection: SQLSession {
    package func cached(_ sql: String) -> PostgresStatement {
        PostgresStatement(connection: self, sql: numbered(sql))
    }

    package var dialect: SQLDialect { .postgres }

    package func send(_ sql: String, _ values: [DatabaseValue], expected: ExpectedChanges?) throws {
        try sendWithoutWaiting(numbered(sql), values, expected: expected)
    }
}

/// A statement of the store on one connection (prepared there the first time it runs).
package struct PostgresStatement: SQLStatement {
    let connection: PostgresConnection
    let sql: String

    package func run(_ values: [DatabaseValue]) throws {
        try connection.query(sql, values)
    }

    package func rows<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> [T] {
        try connection.query(sql, values).map(transform)
    }

    package func firstRow<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> T? {
        try connection.query(sql, values).first.map(transform)
    }
}
