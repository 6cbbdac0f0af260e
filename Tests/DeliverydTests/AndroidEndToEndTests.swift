import Foundation
import TestScheduling
import TestSupport
import Testing

/// The real `deliveryd` with both simulators: an iPhone's Live Activity through APNs and an Android
/// phone's Live Update through FCM, following one order.
@Suite("End to end: one order on an iPhone and an Android phone", .serialized, .heavy)
struct AndroidEndToEndTests {
    static let adminKey = "android-e2e-admin-key-0123"
    static let iphoneToken = String(repeating: "a7", count: 32)
    static let androidToken = "fcm-token_of-the:android.phone-0123456789"
    static let pixelToken = "fcm-token-of-a-pixel-registered-ahead-0123456789"

    /// Both devices get every state once, in order, and their end; the Android messages carry the
    /// same public state as the iPhone's pushes (nothing else: no phone, address or payment); the
    /// push log and the metrics tell the platforms apart. A second Android phone, registered ahead
    /// of orders, gets the same walk from the order's first update on, registering nothing more.
    @Test func oneOrderWalksToDeliveredOnBothPlatforms() throws {
        let apns = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { apns.stop() }
        let fcm = try FCMSimulator()
        defer { fcm.stop() }
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey] + apns.deliverydArguments + fcm.deliverydArguments())
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        let client = Client(port: server.port, simulator: apns)

        let merchant =
            try client.call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-1"], 201)[
                "key"] as! String
        let account =
            try client.call("POST", "/v1/customers/c-1/credentials", merchant, [:], 201)["credential"] as! String
        let ahead = try client.call(
            "PUT", "/v1/customers/c-1/push-to-start/pixel", account,
            ["platform": "android", "pushToken": Self.pixelToken], 200)
        #expect(ahead["platform"] as? String == "android" && ahead["environment"] == nil)

        let eta = Date().addingTimeInterval(1800)
        let created = try client.call(
            "POST", "/v1/orders", merchant, EndToEndTests.orderBody("A-1", customer: "c-1", eta: eta), 201)
        let orderID = (created["order"] as! [String: Any])["id"] as! String
        let tracking = created["trackingToken"] as! String
        let iphone = try client.call(
            "PUT", "/v1/orders/\(orderID)/activities/iphone", tracking,
            ["pushToken": Self.iphoneToken, "environment": "development"], 200)
        #expect((iphone["activity"] as? [String: Any])?["platform"] as? String == "ios")
        let android = try client.call(
            "PUT", "/v1/orders/\(orderID)/activities/android", tracking,
            ["platform": "android", "pushToken": Self.androidToken], 200)
        let activity = android["activity"] as? [String: Any]
        #expect(activity?["platform"] as? String == "android")
        #expect(activity?["firebaseProjectId"] as? String == FCMSimulator.projectID)

        let walk = ["placed", "preparing", "pickup", "delivering", "delivered"]
        // Each step: one push to the iPhone, one message to each Android phone.
        try waitForMessages(apns: 1, fcm: 2)
        for (index, status) in walk.enumerated().dropFirst() {
            try client.call("POST", "/v1/orders/\(orderID)/status", Self.adminKey, ["status": status], 200)
            try waitForMessages(apns: index + 1, fcm: 2 * (index + 1))
        }

        func iphoneStates() throws -> [(event: String, state: NSDictionary)] {
            try apns.records().map { record in
                let aps = EndToEndTests.aps(record)
                return (aps["event"] as? String ?? "", aps["content-state"] as? NSDictionary ?? [:])
            }
        }
        func androidStates(_ token: String) throws -> [(event: String, state: NSDictionary)] {
            try fcm.records().filter { $0["kind"] as? String == "send" && $0["token"] as? String == token }.map {
                let body = try JSONSerialization.jsonObject(with: Data(($0["body"] as? String ?? "").utf8))
                let data = ((body as? [String: Any])?["message"] as? [String: Any])?["data"] as? [String: String]
                let state = try JSONSerialization.jsonObject(with: Data((data?["state"] ?? "").utf8))
                let attributes = try JSONSerialization.jsonObject(with: Data((data?["attributes"] ?? "").utf8))
                #expect((attributes as? [String: Any])?["orderId"] as? String == orderID, "the order is named")
                return (data?["event"] ?? "", state as? NSDictionary ?? [:])
            }
        }
        let iphoneSeen = try iphoneStates()
        #expect(iphoneSeen.map { $0.state["status"] as? String } == walk)
        #expect(iphoneSeen.map(\.event) == ["update", "update", "update", "update", "end"])
        for token in [Self.androidToken, Self.pixelToken] {
            let seen = try androidStates(token)
            #expect(seen.map { $0.state["status"] as? String } == walk, "\(token)")
            #expect(seen.map(\.event) == ["update", "update", "update", "update", "end"], "\(token)")
            // The same public state, field for field, as the iPhone's (the ETA's rendering apart: both
            // come from one projection).
            #expect(seen.map(\.state) == iphoneSeen.map(\.state), "\(token)")
        }
        let everything = try fcm.records().flatMap { PayloadText.strings(inJSON: $0["body"] as? String ?? "") }
        for secret in ["+49 30 1234567", "Hauptstr", "4242", "ring twice", "Ana"] {
            #expect(!everything.contains { $0.contains(secret) }, "\(secret) reached FCM")
        }

        let log =
            try client.call("GET", "/v1/orders/\(orderID)/pushes", merchant, nil, 200)["pushes"] as? [[String: Any]]
        let platforms = (log ?? []).map { $0["platform"] as? String ?? "" }
        #expect(platforms.filter { $0 == "ios" }.count == 5 && platforms.filter { $0 == "android" }.count == 10)
        #expect(
            (log ?? []).filter { $0["platform"] as? String == "android" }.allSatisfy {
                ($0["fcmMessageName"] as? String)?.hasPrefix("projects/\(FCMSimulator.projectID)/messages/") == true
            })
        let metrics = try LoopbackHTTP.send(port: server.port, "GET", "/metrics", bearer: Self.adminKey).text
        #expect(metrics.contains(#"deliveryd_pushes_total{platform="android",event="end",result="accepted"} 2"#))
        #expect(metrics.contains(#"deliveryd_pushes_total{platform="ios",event="end",result="accepted"} 1"#))
        let stats = try client.call("GET", "/v1/admin/stats", Self.adminKey, nil, 200)
        let sending = (stats["sending"] as? [String: Any])?["android"] as? [String: Any]
        #expect(sending?["project"] as? String == FCMSimulator.projectID && sending?["state"] as? String == "sending")
        let pushes = (stats["summary"] as? [String: Any])?["pushes"] as? [String: Any]
        #expect((pushes?["byPlatform"] as? [String: Any])?["android"] as? Double == 10)
        #expect((pushes?["byPlatform"] as? [String: Any])?["ios"] as? Double == 5)

        /// Waits until both simulators hold at least the counts, then a little longer for any extra one.
        func waitForMessages(apns apnsCount: Int, fcm fcmCount: Int) throws {
            func counts() throws -> (Int, Int) {
                (try apns.records().count, try fcm.records().filter { $0["kind"] as? String == "send" }.count)
            }
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let (seenAPNs, seenFCM) = try counts()
                if seenAPNs >= apnsCount && seenFCM >= fcmCount { break }
                usleep(10_000)
            }
            usleep(300_000)
            let (seenAPNs, seenFCM) = try counts()
            try #require(
                seenAPNs == apnsCount && seenFCM == fcmCount,
                "APNs has \(seenAPNs) pushes (expected \(apnsCount)), FCM \(seenFCM) messages (expected \(fcmCount))")
        }
    }
}
