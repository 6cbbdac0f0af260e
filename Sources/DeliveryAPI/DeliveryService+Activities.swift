import HTTPServer
import OrderDomain
import Storage
import Telemetry

extension DeliveryService {
    /// The bounds of what devices register; APNs tokens are hex, today 64 digits, documented as variable.
    enum RegistrationLimits {
        static let identifierLength = 1...128
        static let pushTokenLength = 16...512
        static let bundleIDLength = 1...155
    }

    /// `PUT /v1/orders/{id}/activities/{activityId}`: the customer's app registers (or rotates) the
    /// push token of the order's Live Activity.
    func registerActivity(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        let activityID = call.parameter("activityId")
        try requireCustomer(call, orderID: orderID)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        checkIdentifier(activityID, "activityId", &reader)
        let registration = readRegistration(body, &reader)
        try reader.finish()
        guard let registration else { throw APIError.internalError() }
        let record = try store.registerActivity(
            orderID: orderID, activityID: activityID, pushToken: registration.token,
            environment: registration.environment, bundleID: registration.bundleID, now: call.now
        )
        metrics.activityEvents.increment([record.startedAt == record.registeredAt ? "registered" : "token_rotated"])
        return json(200, .object(["activity": Views.activity(record)]))
    }

    /// `DELETE /v1/orders/{id}/activities/{activityId}`: the user ended the activity; no more pushes.
    func endActivity(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        let activityID = call.parameter("activityId")
        try requireCustomer(call, orderID: orderID)
        guard try store.activity(orderID: orderID, activityID: activityID) != nil else {
            throw APIError.notFound("no such activity")
        }
        if try store.endActivity(
            orderID: orderID, activityID: activityID, reason: "user", now: call.now, onlyIfRegisteredBefore: nil)
        {
            metrics.activityEvents.increment(["removed_by_user"])
        }
        return HTTPResponse(status: 204)
    }

    /// `PUT /v1/customers/{customerId}/push-to-start/{deviceId}`: a device's push-to-start token, used
    /// to start a Live Activity when the customer's next order is created.
    func registerPushToStart(_ call: Call) throws -> HTTPResponse {
        let principal = try staffPrincipal(call, orderID: nil)
        if case .rider = principal { throw APIError.forbidden("a rider may not register push-to-start tokens") }
        let customerID = call.parameter("customerId")
        let deviceID = call.parameter("deviceId")
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        checkIdentifier(customerID, "customerId", &reader)
        checkIdentifier(deviceID, "deviceId", &reader)
        let registration = readRegistration(body, &reader)
        try reader.finish()
        guard let registration else { throw APIError.internalError() }
        try store.registerPushToStart(
            customerID: customerID, deviceID: deviceID, pushToken: registration.token,
            environment: registration.environment, bundleID: registration.bundleID, now: call.now
        )
        return json(
            200,
            .object([
                "customerId": .string(customerID), "deviceId": .string(deviceID),
                "environment": .string(registration.environment.rawValue), "bundleId": .string(registration.bundleID),
                "registeredAt": .time(call.now),
            ])
        )
    }

    /// Only the order's customer registers its activities: staff get `403`, other customers `404`.
    private func requireCustomer(_ call: Call, orderID: String) throws(APIError) {
        switch call.caller {
        case .customer(let ownOrder):
            guard ownOrder == orderID else { throw .notFound("order not found") }
        case .staff:
            throw .forbidden("activities are registered with the order's tracking token")
        }
    }

    private struct Registration {
        let token: String
        let environment: PushEnvironment
        let bundleID: String
    }

    private func readRegistration(_ body: [String: JSONValue], _ reader: inout FieldReader) -> Registration? {
        let token = reader.require(reader.string(body, "pushToken"), "pushToken")?.lowercased()
        if let token,
            !RegistrationLimits.pushTokenLength.contains(token.utf8.count) || token.utf8.count % 2 != 0
                || !token.allSatisfy(\.isHexDigit)
        {
            reader.fail("pushToken", "must be an even number of hex digits, 16 to 512")
        }
        let environmentText = reader.require(reader.string(body, "environment"), "environment")
        let environment = environmentText.flatMap(PushEnvironment.init(rawValue:))
        if environmentText != nil, environment == nil {
            reader.fail("environment", "must be development or production")
        }
        let bundleID = reader.string(body, "bundleId") ?? configuration.defaultBundleID
        if let bundleID {
            let valid =
                RegistrationLimits.bundleIDLength.contains(bundleID.utf8.count)
                && bundleID.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }
            if !valid {
                reader.fail("bundleId", "must be a bundle id such as com.example.app")
            } else if let known = configuration.knownBundleIDs, !known.contains(bundleID) {
                reader.fail(
                    "bundleId", "is not an app deliveryd has an APNs key for: " + known.sorted().joined(separator: ", ")
                )
            }
        } else {
            reader.fail("bundleId", "is required: no default app is configured")
        }
        guard let token, let environment, let bundleID, reader.issues.isEmpty else { return nil }
        return Registration(token: token, environment: environment, bundleID: bundleID)
    }

    private func checkIdentifier(_ value: String, _ field: String, _ reader: inout FieldReader) {
        let valid =
            RegistrationLimits.identifierLength.contains(value.utf8.count)
            && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:".contains($0)) }
        if !valid { reader.fail(field, "must be 1 to 128 letters, digits or - _ . :") }
    }
}
