import DeliveryActivityClient
import DeliveryActivityContract
import Foundation
import TestScheduling
import TestSupport
import Testing

/// The iPhone's side of the contract, played by the rules of a real device: a push-started activity
/// is registered using only what its `start` push carried and the device's own credential.
@Suite("Device loop: push-to-start, the woken app, tenants, late orders", .serialized, .heavy)
struct DeviceLoopTests {
    static let adminKey = "device-loop-admin-key-0123"
    static let startTokenA = String(repeating: "5a", count: 32)
    static let startTokenB = String(repeating: "5b", count: 32)
    static let overwriteToken = String(repeating: "5c", count: 32)
    static let updateToken = String(repeating: "7e", count: 32)

    /// How far deliveryd's clock is moved for the second half of the test: the order, due 5 minutes
    /// after it was placed, is then 40 minutes late.
    static let lateness = 45 * 60

    /// A device registers push-to-start with its customer credential; an order starts an activity on
    /// it; then (deliveryd restarted with its clock 45 minutes on: the ETA is 40 minutes past) the
    /// status moves before the woken app registers, so the registration (order id from the start's
    /// attributes, the device's credential) gets the current state at once; then every update and the
    /// `end` arrive. Every push carries stale and expiration dates in the future, the `end` too with
    /// `--dismissal-delay 0`. Another merchant's customer of the same id gets no start of this order,
    /// cannot register on it, and cannot overwrite the device.
    @Test func pushStartedActivityIsUpdatedToTheEnd() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let arguments = ["--admin-key", Self.adminKey, "--dismissal-delay", "0"] + simulator.deliverydArguments
        let data = NSTemporaryDirectory() + "device-loop-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: data) }
        var server = try DeliverydProcess(extraArguments: arguments, dataDirectory: data, keepData: true)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: simulator)
        let app = CustomerApp(port: server.port)

        func key(_ body: [String: Any]) throws -> String {
            try client.call("POST", "/v1/admin/keys", Self.adminKey, body, 201)["key"] as! String
        }
        let merchantA = try key(["role": "merchant", "merchantId": "m-a"])
        let merchantB = try key(["role": "merchant", "merchantId": "m-b"])
        let rider = try key(["role": "rider", "merchantId": "m-a", "riderId": "r-1"])
        // Each merchant's backend mints a credential for its own signed-in customer "c-42".
        let accountA = try client.call("POST", "/v1/customers/c-42/credentials", merchantA, [:], 201)
        let accountB = try client.call("POST", "/v1/customers/c-42/credentials", merchantB, [:], 201)
        let credentialA = accountA["credential"] as! String
        let credentialB = accountB["credential"] as! String
        for (credential, token) in [(credentialA, Self.startTokenA), (credentialB, Self.startTokenB)] {
            let registered = try app.send(
                DeliveryAPICalls.registerPushToStart(
                    customerId: "c-42", deviceId: "iphone", pushToken: CustomerApp.bytes(hex: token),
                    environment: .production, bundleId: nil, credential: credential))
            try #require(registered.status == 200, "\(registered.text)")
        }
        // Merchants' keys cannot register or remove devices at all.
        let byMerchant = try client.send(
            "PUT", "/v1/customers/c-42/push-to-start/iphone", merchantB,
            ["pushToken": Self.overwriteToken, "environment": "production"])
        #expect(byMerchant.status == 403)

        // An order of merchant A due in 5 minutes: its start goes to A's device only.
        let eta = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.up) * 60 + 5 * 60)
        let created = try client.call(
            "POST", "/v1/orders", merchantA, EndToEndTests.orderBody("L-1", customer: "c-42", eta: eta), 201)
        let orderID = (created["order"] as! [String: Any])["id"] as! String
        try client.waitForPushes(1)
        let start = try #require(try simulator.records().first)
        #expect(start["token"] as? String == Self.startTokenA)

        // What the woken app has: the start's attributes and state, decoded as ActivityKit decodes them.
        let startPayload = try JSONDecoder().decode(
            ActivityKitStart.self, from: Data((start["payload"] as? String ?? "").utf8))
        #expect(startPayload.aps.event == "start")
        #expect(startPayload.aps.attributes.orderId == orderID)
        #expect(startPayload.aps.attributes.orderNumber == "L-1")
        #expect(startPayload.aps.contentState.knownStatus == .placed)

        // 45 minutes later, by deliveryd's clock: the order is 40 minutes late.
        #expect(server.stop() == 0)
        server = try DeliverydProcess(
            extraArguments: arguments, dataDirectory: data, keepData: true, port: server.port,
            clockShift: Self.lateness)
        try LoopbackHTTP.waitUntilHealthy(port: server.port)

        // The order moves before the app registers the new activity's update token.
        try client.step("POST", "/v1/orders/\(orderID)/status", merchantA, ["status": "preparing"], expectPushes: 1)

        // The other tenant's customer cannot touch the order, nor A's device.
        let foreign = try app.send(
            DeliveryAPICalls.registerActivity(
                orderId: orderID, activityId: "x", pushToken: CustomerApp.bytes(hex: Self.overwriteToken),
                environment: .production, bundleId: nil, shownState: nil, credential: credentialB))
        #expect(foreign.status == 404)
        #expect(try app.send(DeliveryAPICalls.liveActivity(orderId: orderID, credential: credentialB)).status == 404)
        let overwrite = try app.send(
            DeliveryAPICalls.registerPushToStart(
                customerId: "c-42", deviceId: "iphone", pushToken: CustomerApp.bytes(hex: Self.overwriteToken),
                environment: .production, bundleId: nil, credential: credentialB))
        #expect(overwrite.status == 200)  // B's own device of the same id, not A's

        // The woken app registers with only the start's order id and its own credential.
        let registered = try app.send(
            DeliveryAPICalls.registerActivity(
                orderId: startPayload.aps.attributes.orderId, activityId: "pushed-1",
                pushToken: CustomerApp.bytes(hex: Self.updateToken), environment: .production, bundleId: nil,
                shownState: startPayload.aps.contentState, credential: credentialA))
        try #require(registered.status == 200, "\(registered.text)")
        try client.waitForPushes(2)

        let path = "/v1/orders/\(orderID)"
        try client.step(
            "PUT", path + "/rider", merchantA, ["riderId": "r-1", "name": "Marco Rossi", "phone": "+39 333 1"],
            expectPushes: 3)
        try client.step("POST", path + "/status", rider, ["status": "pickup"], expectPushes: 4)
        try client.step("POST", path + "/status", rider, ["status": "delivering"], expectPushes: 5)
        try client.step("POST", path + "/status", rider, ["status": "delivered"], expectPushes: 6)

        // Merchant B's own order for its c-42 starts on B's device, with the token B registered last.
        let laterETA = eta.addingTimeInterval(Double(Self.lateness))
        try client.call(
            "POST", "/v1/orders", merchantB, EndToEndTests.orderBody("B-1", customer: "c-42", eta: laterETA), 201)
        try client.waitForPushes(7)

        let records = try simulator.records()
        func pushes(_ token: String) -> [String] {
            records.filter { $0["token"] as? String == token }.map(EndToEndTests.summary)
        }
        #expect(pushes(Self.startTokenA) == ["start placed"])
        #expect(
            pushes(Self.updateToken) == [
                "update preparing", "update preparing rider=Marco", "update pickup rider=Marco",
                "update delivering rider=Marco", "end delivered rider=Marco",
            ])
        #expect(pushes(Self.overwriteToken) == ["start placed"])
        #expect(pushes(Self.startTokenB).isEmpty)
        // The access log names customers' routes, never their ids.
        #expect(server.stop() == 0)
        let customerPaths = server.logLines().compactMap { $0["url.path"] as? String }.filter {
            $0.hasPrefix("/v1/customers/")
        }
        #expect(!customerPaths.isEmpty && !customerPaths.contains { $0.contains("c-42") }, "\(customerPaths)")

        // Late, and dismissed at once: still, nothing carries a date in the past of deliveryd's clock.
        for (index, record) in records.enumerated() {
            let received = (record["received_at"] as? Double ?? 0) + (index == 0 ? 0 : Double(Self.lateness))
            let aps = EndToEndTests.aps(record)
            let headers = record["headers"] as? [String: String] ?? [:]
            let expiration = Double(headers["apns-expiration"] ?? "") ?? 0
            #expect(expiration > received + 600, "apns-expiration \(expiration) at \(received)")
            if let stale = aps["stale-date"] as? Double {
                #expect(stale > received + 600, "stale-date \(stale) at \(received)")
            } else {
                #expect(aps["event"] as? String == "end")
                #expect((aps["dismissal-date"] as? Double ?? .infinity) <= received + 1)
            }
        }
    }

    /// A merchant revokes a signed-out customer's credential: it stops working at once and its
    /// device gets no more starts.
    @Test func revokedCredentialStopsStarts() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey] + simulator.deliverydArguments)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: simulator)
        let app = CustomerApp(port: server.port)
        let merchant =
            try client.call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-a"], 201)[
                "key"] as! String
        let account = try client.call("POST", "/v1/customers/c-1/credentials", merchant, [:], 201)
        let credential = account["credential"] as! String
        let registration = DeliveryAPICalls.registerPushToStart(
            customerId: "c-1", deviceId: "iphone", pushToken: CustomerApp.bytes(hex: Self.startTokenA),
            environment: .production, bundleId: nil, credential: credential)
        #expect(try app.send(registration).status == 200)
        let eta = Date().addingTimeInterval(1800)
        try client.call("POST", "/v1/orders", merchant, EndToEndTests.orderBody("R-1", customer: "c-1", eta: eta), 201)
        try client.waitForPushes(1)

        let revoke = try client.send("DELETE", "/v1/customers/c-1/credentials/\(account["id"] as! String)", merchant)
        #expect(revoke.status == 204)
        #expect(try app.send(registration).status == 401)
        try client.call("POST", "/v1/orders", merchant, EndToEndTests.orderBody("R-2", customer: "c-1", eta: eta), 201)
        try client.waitForPushes(1)
    }
}

/// A `start` push as ActivityKit reads it.
struct ActivityKitStart: Decodable {
    struct APS: Decodable {
        var event: String
        var attributes: DeliveryAttributes
        var contentState: DeliveryAttributes.ContentState
        var staleDate: Int?

        enum CodingKeys: String, CodingKey {
            case event, attributes
            case contentState = "content-state"
            case staleDate = "stale-date"
        }
    }

    var aps: APS
}
