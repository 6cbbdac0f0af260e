public import FoundationEssentials

extension SQLStore {
    /// Stores a new customer credential.
    /// - Throws: `StorageError` when the id is taken.
    public func createCustomerCredential(_ credential: CustomerCredentialRecord) throws(StorageError) {
        try writeSQL { connection in
            try connection.cached(
                "INSERT INTO customer_credentials (\(StoreSQL.customerCredentialColumns)) VALUES (?, ?, ?, ?, ?, NULL)"
            ).run([
                .text(credential.id), .text(credential.keyHash), .text(credential.merchantID),
                .text(credential.customerID), .integer(credential.createdAt.storageMilliseconds),
            ])
        }
    }

    /// One customer credential by id, revoked or not.
    public func customerCredential(id: String) throws(StorageError) -> CustomerCredentialRecord? {
        try readSession { connection in
            try connection.cached(
                "SELECT \(StoreSQL.customerCredentialColumns) FROM customer_credentials WHERE id = ?"
            ).firstRow([.text(id)]) { row in
                CustomerCredentialRecord(
                    id: try row.text("id"), keyHash: try row.text("key_hash"), merchantID: try row.text("merchant_id"),
                    customerID: try row.text("customer_id"),
                    createdAt: Date(storageMilliseconds: try row.int("created_at")),
                    revokedAt: try row.optionalInt("revoked_at").map(Date.init(storageMilliseconds:)))
            }
        }
    }

    /// Revokes a customer's credential and removes the push-to-start devices registered with it, in one
    /// transaction: a signed-out customer's phone gets no more activities.
    /// - Returns: whether a live credential of that merchant's customer had this id.
    @discardableResult
    public func revokeCustomerCredential(id: String, merchantID: String, customerID: String, now: Date)
        throws(StorageError) -> Bool
    {
        try writeSQL { connection in
            try connection.cached(
                """
                UPDATE customer_credentials SET revoked_at = ?
                WHERE id = ? AND merchant_id = ? AND customer_id = ? AND revoked_at IS NULL
                """
            ).run([.integer(now.storageMilliseconds), .text(id), .text(merchantID), .text(customerID)])
            guard connection.changes > 0 else { return false }
            let removed = try connection.cached(
                "DELETE FROM push_to_start_tokens WHERE credential_id = ? RETURNING merchant_id, customer_id, device_id"
            ).rows([.text(id)]) {
                DeviceKey(
                    merchantID: try $0.text("merchant_id"), customerID: try $0.text("customer_id"),
                    deviceID: try $0.text("device_id"))
            }
            for device in removed {
                try StoreSQL.emitPushToStartRemoved(device, reason: "credential_revoked", now: now, connection)
            }
            return true
        }
    }
}

extension StoreSQL {
    fileprivate static let customerCredentialColumns = "id, key_hash, merchant_id, customer_id, created_at, revoked_at"
}
