package import Storage

/// PostgreSQL's SQLSTATE codes as the `StorageError` codes the service tells apart.
package enum PostgresError {
    package static func storageError(sqlState: String?, message: String) -> StorageError {
        StorageError(code(sqlState: sqlState), message, underlying: sqlState.map { "SQLSTATE \($0)" })
    }

    /// Class `23` (integrity) is a refused write; `53100` a full disk; lock, serialization and
    /// deadlock failures and a cancelled (timed-out) statement are `busy`, worth a retry; class
    /// `08` (connection), `57P0x` (the server shutting down or starting) `unavailable`; `XX001`/`XX002`
    /// damaged data; `58030` an I/O error; anything else `failed`.
    package static func code(sqlState: String?) -> StorageError.Code {
        guard let state = sqlState else { return .failed }
        switch state {
        case "53100": return .full
        case "40001", "40P01", "55P03", "57014", "53300": return .busy
        case "57P01", "57P02", "57P03": return .unavailable
        case "XX001", "XX002": return .corrupt
        case "58030": return .io
        default: break
        }
        if state.hasPrefix("23") { return .constraint }
        if state.hasPrefix("08") { return .unavailable }
        return .failed
    }
}
