package import Storage

/// A pooled connection as the store's `SQLSession`: the shared statements, numbered for PostgreSQL
/// and prepared once per connection.
extension PostgresConnection: SQLSession {
    package func cached(_ sql: String) -> PostgresStatement {
        PostgresStatement(connection: self, sql: numbered(sql), plannedForValues: false)
    }

    package func plannedForValues(_ sql: String) -> PostgresStatement {
        PostgresStatement(connection: self, sql: numbered(sql), plannedForValues: true)
    }

    package var dialect: SQLDialect { .postgres }

    package var lockedOrderReads: LockedOrderReads? { lockedOrders }

    package func send(_ sql: String, _ values: [DatabaseValue], expected: ExpectedChanges?) throws {
        try sendWithoutWaiting(numbered(sql), values, expected: expected)
    }
}

/// A statement of the store on one connection: prepared there the first time it runs, or planned
/// at each call for its values (`SQLSession.plannedForValues`).
package struct PostgresStatement: SQLStatement {
    let connection: PostgresConnection
    let sql: String
    let plannedForValues: Bool

    package func run(_ values: [DatabaseValue]) throws {
        try query(values)
    }

    package func rows<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> [T] {
        try query(values).map(transform)
    }

    package func firstRow<T>(_ values: [DatabaseValue], _ transform: (any DatabaseRow) throws -> T) throws -> T? {
        try query(values).first.map(transform)
    }

    private func query(_ values: [DatabaseValue]) throws(StorageError) -> PostgresRows {
        plannedForValues ? try connection.queryPlannedForValues(sql, values) : try connection.query(sql, values)
    }
}
