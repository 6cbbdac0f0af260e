import DeliveryActivityClient
import DeliveryActivityContract
import Foundation
import TestScheduling
import TestSupport
import Testing

/// A pre-order as a phone lives it: placed a day ahead, its activity starts on delivery day.
@Suite("Pre-orders end to end", .serialized, .heavy)
struct PreOrderEndToEndTests {
    static let adminKey = "pre-order-admin-key-0123"
    static let startToken = String(repeating: "6d", count: 32)

    /// An order due in 24 hours sends no push-to-start when it is placed; deliveryd restarted with its
    /// clock 23 hours and a minute on (libfaketime) sends it, an hour before the order is due, so the
    /// 8 hours iOS gives the activity cover the delivery.
    @Test func aPreOrderForTomorrowStartsAnHourBeforeItIsDue() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let arguments = ["--admin-key", Self.adminKey] + simulator.deliverydArguments
        let data = NSTemporaryDirectory() + "pre-order-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: data) }
        var server = try DeliverydProcess(extraArguments: arguments, dataDirectory: data, keepData: true)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: simulator)
        let app = CustomerApp(port: server.port)
        let merchant =
            try client.call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-1"], 201)[
                "key"] as! String
        let credential =
            try client.call("POST", "/v1/customers/c-42/credentials", merchant, [:], 201)["credential"] as! String
        let registered = try app.send(
            DeliveryAPICalls.registerPushToStart(
                customerId: "c-42", deviceId: "iphone", pushToken: CustomerApp.bytes(hex: Self.startToken),
                environment: .production, bundleId: nil, credential: credential))
        try #require(registered.status == 200, "\(registered.text)")

        let eta = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.up) * 60 + 24 * 3600)
        let created = try client.call(
            "POST", "/v1/orders", merchant, EndToEndTests.orderBody("T-1", customer: "c-42", eta: eta), 201)
        let orderID = (created["order"] as! [String: Any])["id"] as! String
        // A push the pusher had due would be on the wire within a second or two; none may come.
        Thread.sleep(forTimeInterval: 3)
        #expect(try simulator.records().isEmpty, "a start went out a day before delivery")

        #expect(server.stop() == 0)
        let shift = 23 * 3600 + 60
        server = try DeliverydProcess(
            extraArguments: arguments, dataDirectory: data, keepData: true, port: server.port, clockShift: shift)
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        try client.waitForPushes(1)
        let start = try #require(try simulator.records().first)
        #expect(start["token"] as? String == Self.startToken)
        let payload = try JSONDecoder().decode(
            ActivityKitStart.self, from: Data((start["payload"] as? String ?? "").utf8))
        #expect(payload.aps.event == "start" && payload.aps.attributes.orderId == orderID)
        // Fresh by the shifted clock: the activity starts now, on delivery day.
        let shiftedNow = Date().addingTimeInterval(Double(shift))
        let stale = try #require(payload.aps.staleDate)
        #expect(Double(stale) > shiftedNow.timeIntervalSince1970, "stale at \(stale), now \(shiftedNow)")
    }
}
