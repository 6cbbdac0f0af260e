public import FoundationEssentials

extension SQLStore {
    /// Stores a new API key.
    /// - Throws: `StorageError` when the id is taken.
    public func createAPIKey(_ key: APIKeyRecord) throws(StorageError) {
        try writeSQL { connection in
            try connection.cached(
                "INSERT INTO api_keys (\(StoreSQL.apiKeyColumns)) VALUES (?, ?, ?, ?, ?, ?, NULL)"
            ).run(StoreSQL.insertValues(of: key))
        }
    }

    /// Makes the key with this id exactly `key` (hash, role, bindings): for the admin key given by
    /// configuration, which may change between starts. A key revoked with this same value stays
    /// revoked (a restart must not undo a revocation); a new value is a new, live key.
    public func upsertAPIKey(_ key: APIKeyRecord) throws(StorageError) {
        try writeSQL { connection in
            try connection.cached(
                """
                INSERT INTO api_keys (\(StoreSQL.apiKeyColumns)) VALUES (?, ?, ?, ?, ?, ?, NULL)
                ON CONFLICT (id) DO UPDATE SET key_hash = excluded.key_hash, role = excluded.role,
                    merchant_id = excluded.merchant_id, rider_id = excluded.rider_id,
                    revoked_at = CASE WHEN api_keys.key_hash = excluded.key_hash THEN api_keys.revoked_at END
                """
            ).run(StoreSQL.insertValues(of: key))
        }
    }

    /// One key by id, revoked or not.
    public func apiKey(id: String) throws(StorageError) -> APIKeyRecord? {
        try readSession { connection in
            try connection.cached("SELECT \(StoreSQL.apiKeyColumns) FROM api_keys WHERE id = ?").firstRow(
                [.text(id)], StoreSQL.decodeAPIKey)
        }
    }

    /// Every key, oldest first, revoked ones included.
    public func apiKeys() throws(StorageError) -> [APIKeyRecord] {
        try readSession { connection in
            try connection.cached("SELECT \(StoreSQL.apiKeyColumns) FROM api_keys ORDER BY created_at, id").rows(
                [], StoreSQL.decodeAPIKey)
        }
    }

    /// How many keys of a role are not revoked (start-up creates an admin key when there is none).
    public func activeAPIKeyCount(role: APIKeyRole) throws(StorageError) -> Int {
        try readSession { connection in
            try connection.cached("SELECT count(*) AS live FROM api_keys WHERE role = ? AND revoked_at IS NULL")
                .firstRow([.text(role.rawValue)]) { Int(try $0.int("live")) } ?? 0
        }
    }

    /// Revokes a key; returns whether a live key with that id existed.
    @discardableResult
    public func revokeAPIKey(id: String, now: Date) throws(StorageError) -> Bool {
        try writeSQL { connection in
            try connection.cached("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run([
                .integer(now.storageMilliseconds), .text(id),
            ])
            return connection.changes > 0
        }
    }

    /// A number that moves whenever a stored key changes (revoked, replaced, deleted) through any
    /// node or the `keys` command: a trigger bumps it in the change's own transaction.
    public func apiKeyGeneration() throws(StorageError) -> Int64 {
        try readSession { connection in
            try connection.cached("SELECT generation FROM api_key_changes WHERE id = 1").firstRow([]) {
                try $0.int("generation")
            } ?? 0
        }
    }

    /// The stored response of an idempotent write, unless it expired.
    public func idempotentResponse(principal: String, key: String, now: Date) throws(StorageError)
        -> IdempotentResponse?
    {
        try readSession { connection in
            try connection.cached(
                """
                SELECT request_hash, response_code, response_body FROM idempotency_keys
                WHERE principal = ? AND key = ? AND expires_at >= ? AND response_code != 0
                """
            ).firstRow(
                [.text(principal), .text(key), .integer(now.storageMilliseconds)], StoreSQL.decodeIdempotentResponse)
        }
    }
}

extension StoreSQL {
    fileprivate static let apiKeyColumns = "id, key_hash, role, merchant_id, rider_id, created_at, revoked_at"

    /// The values of `apiKeyColumns` but the last, for an `INSERT` of a live key.
    fileprivate static func insertValues(of key: APIKeyRecord) -> [DatabaseValue] {
        [
            .text(key.id), .text(key.keyHash), .text(key.role.rawValue),
            key.merchantID.map(DatabaseValue.text) ?? .null, key.riderID.map(DatabaseValue.text) ?? .null,
            .integer(key.createdAt.storageMilliseconds),
        ]
    }

    fileprivate static func decodeAPIKey(_ row: any DatabaseRow) throws -> APIKeyRecord {
        APIKeyRecord(
            id: try row.text("id"), keyHash: try row.text("key_hash"), role: try row.value("role"),
            merchantID: try row.optionalText("merchant_id"), riderID: try row.optionalText("rider_id"),
            createdAt: Date(storageMilliseconds: try row.int("created_at")),
            revokedAt: try row.optionalInt("revoked_at").map(Date.init(storageMilliseconds:))
        )
    }

    /// A kept answer: `request_hash`, `response_code` and `response_body` of `idempotency_keys`.
    static func decodeIdempotentResponse(_ row: any DatabaseRow) throws -> IdempotentResponse {
        IdempotentResponse(
            requestHash: try row.text("request_hash"), status: Int(try row.int("response_code")),
            body: try row.blob("response_body"))
    }
}
