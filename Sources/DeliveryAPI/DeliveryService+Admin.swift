import HTTPServer
public import OrderDomain
public import Storage
import Telemetry

extension DeliveryService {
    /// `POST /v1/admin/keys`: `{role, merchantId?, riderId?}` → the new key, shown this once. A rider
    /// key names its merchant too: riders are the merchant's own.
    func createKey(_ call: Call) throws -> HTTPResponse {
        try requireAdmin(call)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let roleText = reader.require(reader.string(body, "role"), "role")
        let role = roleText.flatMap(APIKeyRole.init(rawValue:))
        if roleText != nil, role == nil { reader.fail("role", "must be merchant, rider or admin") }
        let merchantID = reader.string(body, "merchantId")
        let riderID = reader.string(body, "riderId")
        try reader.finish(adding: Self.bindingIssues(role: role, merchantID: merchantID, riderID: riderID))
        guard let role else { throw APIError.internalError() }
        let (key, record) = Credentials.newAPIKey(
            role: role, merchantID: role == .admin ? nil : merchantID, riderID: role == .rider ? riderID : nil,
            now: call.now)
        try store.createAPIKey(record)
        guard case .object(var view) = Views.apiKey(record) else { throw APIError.internalError() }
        view["key"] = .string(key)
        return json(201, .object(view))
    }

    /// The binding rules of a key's role, as field issues; shared with `deliveryd keys create`.
    public static func bindingIssues(role: APIKeyRole?, merchantID: String?, riderID: String?) -> [FieldIssue] {
        let valid = OrderLimits.isIdentifier
        var issues: [FieldIssue] = []
        switch role {
        case .merchant?:
            if merchantID.map(valid) != true {
                issues.append(
                    FieldIssue(
                        field: "merchantId", problem: "is required for a merchant key (1 to 64 characters, no spaces)"))
            }
            if riderID != nil { issues.append(FieldIssue(field: "riderId", problem: "only a rider key has one")) }
        case .rider?:
            if merchantID.map(valid) != true {
                issues.append(
                    FieldIssue(
                        field: "merchantId",
                        problem:
                            "is required for a rider key: the merchant the rider works for (1 to 64 characters, no spaces)"
                    ))
            }
            if riderID.map(valid) != true {
                issues.append(
                    FieldIssue(field: "riderId", problem: "is required for a rider key (1 to 64 characters, no spaces)")
                )
            }
        case .admin?:
            if merchantID != nil {
                issues.append(FieldIssue(field: "merchantId", problem: "only merchant and rider keys have one"))
            }
            if riderID != nil { issues.append(FieldIssue(field: "riderId", problem: "only a rider key has one")) }
        case nil: break
        }
        return issues
    }

    /// `GET /v1/admin/keys`: every key without its secret.
    func listKeys(_ call: Call) throws -> HTTPResponse {
        try requireAdmin(call)
        return json(200, .object(["keys": .array(try store.apiKeys().map(Views.apiKey))]))
    }

    /// `DELETE /v1/admin/keys/{id}`: revokes a key at once.
    func revokeKey(_ call: Call) throws -> HTTPResponse {
        guard case .staff(.admin, let ownKey) = call.caller else { return try requireAdmin(call) }
        let id = call.parameter("id")
        if id == ownKey { throw APIError.conflict("a key cannot revoke itself; use another admin key") }
        guard try store.revokeAPIKey(id: id, now: call.now) else { throw APIError.notFound("no such live key") }
        apiKeys.forget(id)
        return HTTPResponse(status: 204)
    }

    /// `GET /v1/admin/dead-letters?limit=N`: pushes that could not be delivered, newest first.
    func listDeadLetters(_ call: Call) throws -> HTTPResponse {
        try requireAdmin(call)
        var limit = 100
        for pair in (call.request.query ?? "").split(separator: "&") where pair.hasPrefix("limit=") {
            guard let value = Int(pair.dropFirst(6)), (1...1000).contains(value) else {
                throw APIError.validationFailed([FieldIssue(field: "limit", problem: "must be 1 to 1000")])
            }
            limit = value
        }
        let letters = try store.deadLetters(limit: limit)
        return json(200, .object(["deadLetters": .array(letters.map(Views.deadLetter))]))
    }

    /// `POST /v1/admin/dead-letters/replay`: `{ids?}`; without ids every dead letter is queued again.
    func replayDeadLetters(_ call: Call) throws -> TransactionStep {
        try requireAdmin(call)
        var ids: [Int64]?
        if !call.request.body.isEmpty {
            let body = try jsonObject(call.request)
            var reader = FieldReader()
            if case .null? = body["ids"] {
                // `null` is not "every dead letter": that is said by leaving `ids` out.
                reader.fail("ids", "must be an array of dead letter ids; leave it out to replay every dead letter")
            } else if let values = reader.array(body, "ids") {
                ids = values.enumerated().compactMap { index, value in
                    reader.wholeNumber(value, path: "ids[\(index)]", in: 1...FieldReader.largestExactInteger)
                }
            }
            try reader.finish()
        }
        return { [ids] transaction in
            let replayed = try transaction.replayDeadLetters(ids: ids, now: call.now)
            return Written {
                self.json(200, .object(["replayed": .number(Double(replayed))]))
            } afterCommit: {
                self.wakePusher(replayed)
            }
        }
    }

    @discardableResult
    private func requireAdmin(_ call: Call) throws(APIError) -> HTTPResponse {
        guard case .staff(.admin, _) = call.caller else { throw .forbidden("this needs an admin key") }
        return HTTPResponse(status: 200)
    }
}

extension DeliveryService {
    /// `DELETE /v1/admin/merchants/{merchantId}/customers/{customerId}/personal-data`: the right to
    /// erasure. Every order of that merchant's customer, open or ended, loses the customer's name,
    /// phone, address, payment, note, destination, the rider's phone and free-text reasons; the
    /// customer's push-to-start devices are removed and the orders' activities ended. The orders'
    /// statuses and times stay. Nothing of it is left in the database's files afterwards (backups
    /// taken before keep theirs).
    func erasePersonalData(_ call: Call) throws -> HTTPResponse {
        try requireAdmin(call)
        let merchantID = call.parameter("merchantId")
        let customerID = call.parameter("customerId")
        var reader = FieldReader()
        for (field, value) in [("merchantId", merchantID), ("customerId", customerID)]
        where !OrderLimits.isIdentifier(value) {
            reader.fail(field, "must be 1 to 64 characters without white space or control characters")
        }
        try reader.finish()  // a well-formed id that names no customer erases nothing (0 orders)
        let report = try store.erasePersonalData(merchantID: merchantID, customerID: customerID, now: call.now)
        logger.info(
            "customer.personal_data_erased",
            [
                "merchant.id": .string(merchantID), "erased.orders": .int(report.orders),
                "erased.devices": .int(report.devices), "request.id": .string(call.request.requestID),
            ])
        return json(
            200,
            .object([
                "merchantId": .string(merchantID), "customerId": .string(customerID),
                "erasedOrders": .number(Double(report.orders)), "removedDevices": .number(Double(report.devices)),
                "endedActivities": .number(Double(report.activities)),
            ]))
    }
}
