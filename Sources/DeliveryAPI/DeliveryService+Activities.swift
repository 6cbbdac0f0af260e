import DeliveryActivityContract
import FoundationEssentials
import HTTPServer
import OrderDomain
import Projection
import Storage
import Telemetry

extension DeliveryService {
    /// The bounds of what devices register; APNs tokens are hex, today 64 digits, documented as
    /// variable; FCM registration tokens are opaque, today about 160 characters of base64url and `:`.
    enum RegistrationLimits {
        static let identifierLength = 1...128
        static let pushTokenLength = 16...512
        static let fcmTokenLength = 16...1024
        static let bundleIDLength = 1...155
    }

    /// `PUT /v1/orders/{id}/activities/{activityId}`: the customer's app registers (or rotates) the
    /// push token of the order's Live Activity, with the order's tracking token or its customer
    /// credential (what an app woken by a `start` push holds). The order's current state is pushed at
    /// once unless the activity already shows it.
    func registerActivity(_ call: Call) throws -> TransactionStep {
        let orderID = call.parameter("id")
        let activityID = call.parameter("activityId")
        try requireCustomer(call, orderID: orderID)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        checkIdentifier(activityID, "activityId", &reader)
        let registration = readRegistration(body, &reader)
        let shown = readShownState(body, &reader)
        try reader.finish()
        guard let registration else { throw APIError.internalError() }
        if let wait = limiters.registrationsByOrder.take("order:" + orderID, now: call.now) {
            metrics.rateLimited.increment(["registrations_per_order"])
            throw APIError.rateLimited("too many activity registrations for this order", retryAfter: wait)
        }
        let liveLimit = configuration.rateLimits.activitiesPerOrder
        return { transaction in
            // Locked and checked in the transaction of the registration: no token slips in after the end.
            guard let order = try transaction.lockOrder(id: orderID) else { throw APIError.notFound("order not found") }
            try order.checkOpen()
            let stored = try self.countingLimit("activities_per_order") {
                try transaction.registerActivity(
                    orderID: orderID, activityID: activityID, pushToken: registration.token,
                    environment: registration.environment, bundleID: registration.bundleID,
                    platform: registration.platform, shown: shown, liveLimit: liveLimit, now: call.now,
                    requestID: call.request.requestID)
            }
            return Written {
                self.json(200, .object(["activity": Views.activity(stored.record)]))
            } afterCommit: {
                self.metrics.activityEvents.increment([stored.rotated ? "token_rotated" : "registered"])
                self.wakePusher(stored.queuedPushes)
            }
        }
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

    /// `PUT /v1/customers/{customerId}/push-to-start/{deviceId}`: the customer's app registers its
    /// device's push-to-start token with its customer credential; the merchant's next order for this
    /// customer starts a Live Activity on it. Devices belong to one merchant's customer: no other
    /// merchant's order ever starts an activity on them.
    func registerPushToStart(_ call: Call) throws -> TransactionStep {
        let device = try ownDevice(call)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        checkIdentifier(device.customerID, "customerId", &reader)
        checkIdentifier(device.deviceID, "deviceId", &reader)
        let registration = readRegistration(body, &reader)
        try reader.finish()
        guard let registration, case .customerAccount(let account) = call.caller else {
            throw APIError.internalError()
        }
        let deviceLimit = configuration.rateLimits.devicesPerCustomer
        let answer = JSONValue.object(
            [
                "merchantId": .string(device.merchantID), "customerId": .string(device.customerID),
                "deviceId": .string(device.deviceID), "registeredAt": .time(call.now),
            ].merging(Views.pushAddress(registration.platform, registration.environment, registration.bundleID)) { $1 })
        return { transaction in
            try self.countingLimit("devices_per_customer") {
                try transaction.registerPushToStart(
                    device, credentialID: account.credentialID, pushToken: registration.token,
                    environment: registration.environment, bundleID: registration.bundleID,
                    platform: registration.platform, deviceLimit: deviceLimit, now: call.now)
            }
            return Written { self.json(200, answer) }
        }
    }

    /// `DELETE /v1/customers/{customerId}/push-to-start/{deviceId}`: the customer signed out on this
    /// device, or turned Live Activities off.
    func removePushToStart(_ call: Call) throws -> HTTPResponse {
        let device = try ownDevice(call)
        guard try store.removePushToStart(device, now: call.now) else { throw APIError.notFound("no such device") }
        return HTTPResponse(status: 204)
    }

    /// The device of the path, if the caller is that customer's app: other customers get `404`,
    /// staff and tracking tokens `403` (devices register themselves, with a customer credential).
    private func ownDevice(_ call: Call) throws(APIError) -> DeviceKey {
        let customerID = call.parameter("customerId")
        switch call.caller {
        case .customerAccount(let account):
            guard account.customerID == customerID else { throw .notFound("customer not found") }
            return DeviceKey(
                merchantID: account.merchantID, customerID: customerID, deviceID: call.parameter("deviceId"))
        case .staff, .customer:
            throw .forbidden(
                "push-to-start tokens are registered by the customer's app with its customer credential (dc_…)")
        }
    }

    /// Runs a registration, counting in `/metrics` when it hit its cap.
    private func countingLimit<T>(_ limit: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StorageError where error.code == .limitReached {
            metrics.rateLimited.increment([limit])
            throw error
        }
    }

    /// Only the order's customer registers its activities, with the order's tracking token or the
    /// customer credential of the order's merchant and customer: staff get `403`, others `404`.
    private func requireCustomer(_ call: Call, orderID: String) throws {
        switch call.caller {
        case .customer(let ownOrder):
            guard ownOrder == orderID else { throw APIError.notFound("order not found") }
        case .customerAccount(let account):
            guard let order = try store.order(id: orderID), account.owns(order) else {
                throw APIError.notFound("order not found")
            }
        case .staff:
            throw APIError.forbidden("activities are registered by the customer's app")
        }
    }

    /// `contentState`: what the activity shows now, as the app decodes it (dates in seconds since 2001).
    private func readShownState(_ body: [String: JSONValue], _ reader: inout FieldReader) -> ShownState? {
        let shown = reader.nested(body, "contentState") { reader, state -> ShownState? in
            let statusText = reader.require(reader.string(state, "status"), "status")
            let status = statusText.flatMap(OrderStatus.init(rawValue:))
            if statusText != nil, status == nil { reader.fail("status", "is not a status deliveryd sends") }
            let stage = reader.require(reader.integer(state, "stage"), "stage")
            let progress = reader.require(reader.number(state, "progress"), "progress")
            let label = reader.require(reader.string(state, "statusText"), "statusText")
            let arrival = reader.require(reader.number(state, "estimatedArrival"), "estimatedArrival")
            let riderName = reader.string(state, "riderName")
            let remainingDistance = reader.integer(state, "remainingDistance")
            if let remainingDistance, remainingDistance < 0 { reader.fail("remainingDistance", "must not be negative") }
            var arriving = false
            switch state["arriving"] {
            case nil, .null?: break
            case .bool(let value)?: arriving = value
            case _?: reader.fail("arriving", "must be a boolean")
            }
            if let stage, !(0...4).contains(stage) { reader.fail("stage", "must be 0 to 4") }
            if let progress, !(0...1).contains(progress) { reader.fail("progress", "must be 0 to 1") }
            // Seconds since 2001 within about a century either way: a date the server could ever have sent.
            if let arrival, !(-3.2e9...3.2e9).contains(arrival) {
                reader.fail("estimatedArrival", "must be seconds since 2001-01-01, as a Date encodes")
            }
            guard let status, let stage, let progress, let label, let arrival, reader.issues.isEmpty else {
                return nil
            }
            let shown = ContentState(
                status: status.rawValue, stage: stage, progress: progress, statusText: label,
                estimatedArrival: Date(timeIntervalSinceReferenceDate: arrival), riderName: riderName,
                remainingDistance: remainingDistance, arriving: arriving)
            return ShownState(status: status, fingerprint: projector.fingerprint(shown))
        }
        return shown ?? nil
    }

    private struct Registration {
        let platform: PushPlatform
        let token: String
        let environment: PushEnvironment
        /// The app's bundle id, or an Android app's Firebase project.
        let bundleID: String
    }

    /// `platform` (`ios` unless it says `android`) and the push address of that platform.
    private func readRegistration(_ body: [String: JSONValue], _ reader: inout FieldReader) -> Registration? {
        let platformText = reader.string(body, "platform") ?? PushPlatform.ios.rawValue
        switch PushPlatform(rawValue: platformText) {
        case .ios?: return readAppleRegistration(body, &reader)
        case .android?: return readAndroidRegistration(body, &reader)
        case nil:
            reader.fail("platform", "must be ios or android")
            return nil
        }
    }

    /// An Android device: its FCM registration token and its app's Firebase project, which must be
    /// the project of the service account deliveryd sends with (no other could be reached).
    private func readAndroidRegistration(_ body: [String: JSONValue], _ reader: inout FieldReader) -> Registration? {
        let token = reader.require(reader.string(body, "pushToken"), "pushToken")
        if let token,
            !RegistrationLimits.fcmTokenLength.contains(token.utf8.count)
                || !token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_:.".contains($0)) })
        {
            reader.fail("pushToken", "must be an FCM registration token: 16 to 1024 letters, digits or - _ : .")
        }
        for field in ["environment", "bundleId"] where body[field] != nil {
            reader.fail(field, "is an iOS field: an Android device names its Firebase project (firebaseProjectId)")
        }
        guard let sendingProject = configuration.androidProject else {
            reader.fail(
                "platform",
                "android devices cannot be reached: this deliveryd has no FCM service account (--fcm-service-account-file)"
            )
            return nil
        }
        let project = reader.string(body, "firebaseProjectId") ?? sendingProject
        if project != sendingProject {
            reader.fail("firebaseProjectId", "is not the Firebase project deliveryd sends for: " + sendingProject)
        }
        guard let token, reader.issues.isEmpty else { return nil }
        return Registration(platform: .android, token: token, environment: .production, bundleID: project)
    }

    private func readAppleRegistration(_ body: [String: JSONValue], _ reader: inout FieldReader) -> Registration? {
        if body["firebaseProjectId"] != nil {
            reader.fail("firebaseProjectId", "is an Android field: an iPhone names its app (bundleId)")
        }
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
        return Registration(platform: .ios, token: token, environment: environment, bundleID: bundleID)
    }

    func checkIdentifier(_ value: String, _ field: String, _ reader: inout FieldReader) {
        let valid =
            RegistrationLimits.identifierLength.contains(value.utf8.count)
            && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:".contains($0)) }
        if !valid { reader.fail(field, "must be 1 to 128 letters, digits or - _ . :") }
    }
}

extension DeliveryService {
    /// Finds the push-to-starts that APNs accepted more than `startRegistrationTimeout` ago whose
    /// activity registered no update token, and makes each visible once: the order's push log (reason
    /// `NoUpdateTokenRegistered`), `deliveryd_stalled_remote_starts_total` by app, the `start_stalled`
    /// Live Activity event of the stats, and a log line. Call it every half minute or so, on every
    /// node: one at a time does the work.
    /// - Returns: how many were found.
    @discardableResult
    public func sweepStalledStarts() -> Int {
        let now = clock()
        do {
            // One node at a time: another node sweeping now finds the same starts.
            let stalled =
                try store.exclusively("stalled starts") {
                    try store.markStalledStarts(
                        sentBefore: now.addingTimeInterval(-configuration.startRegistrationTimeout), now: now)
                } ?? []
            for start in stalled {
                metrics.stalledStarts.increment([start.bundleID ?? "unknown"])
                metrics.activityEvents.increment(["start_stalled"])
                logger.warning(
                    "push_to_start.stalled",
                    [
                        "order.id": .string(start.orderID), "merchant.id": .string(start.device.merchantID),
                        "device.id": .string(start.device.deviceID), "app": .string(start.bundleID ?? "unknown"),
                        "note":
                            "APNs accepted the start; no update token came (Live Activities off, or the app not woken)",
                    ])
            }
            return stalled.count
        } catch {
            logger.error("push_to_start.sweep_failed", ["error": .string("\(error)")])
            return 0
        }
    }
}
