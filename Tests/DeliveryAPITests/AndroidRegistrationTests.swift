import DeliveryAPI
import Foundation
import Storage
import TestSupport
import Testing

/// Android phones register as iPhones do, on the same routes with `"platform": "android"`: an FCM
/// registration token and the Firebase project, which must be the one deliveryd sends for.
@Suite("Android registrations")
struct AndroidRegistrationTests {
    static let project = "deliveryd-android"
    static let fcmToken = "dGhpcyBpcyBub3QgYSByZWFs:APA91bH_sample-token.0123456789"

    static func harness() throws -> APIHarness {
        try APIHarness(
            configuration: modified(DeliveryServiceConfiguration(defaultBundleID: "com.example.app")) {
                $0.androidProject = project
            })
    }

    /// An Android activity is stored with its token as FCM gave it (not lowercased, unlike an APNs
    /// token) and answered with its platform and project; an Android device is registered ahead of
    /// orders the same way, with the customer credential.
    @Test func androidDevicesRegisterOnTheSameRoutes() throws {
        let api = try Self.harness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1", customer: "c-1")
        let reply = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/phone", as: order.token,
            json: ["platform": "android", "pushToken": Self.fcmToken])
        try #require(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let view = reply.json["activity"] as? [String: Any]
        #expect(view?["platform"] as? String == "android" && view?["firebaseProjectId"] as? String == Self.project)
        #expect(view?["environment"] == nil && view?["bundleId"] == nil)
        let stored = try #require(try api.store.activity(orderID: order.id, activityID: "phone"))
        #expect(stored.platform == .android && stored.pushToken == Self.fcmToken && stored.bundleID == Self.project)

        let credential = try api.customerCredential(merchant, customer: "c-1").credential
        let device = try api.send(
            "PUT", "/v1/customers/c-1/push-to-start/pixel", as: credential,
            json: ["platform": "android", "pushToken": Self.fcmToken, "firebaseProjectId": Self.project])
        #expect(device.status == 200 && device.json["platform"] as? String == "android")
        let record = try api.store.pushToStart(DeviceKey(merchantID: "m-1", customerID: "c-1", deviceID: "pixel"))
        #expect(record?.platform == .android && record?.pushToken == Self.fcmToken)

        // An iPhone's registration is unchanged, and says so.
        let iphone = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/iphone", as: order.token,
            json: ["pushToken": "AABBCCDDEEFF00112233445566778899", "environment": "production"])
        #expect((iphone.json["activity"] as? [String: Any])?["platform"] as? String == "ios")
        #expect(try api.store.activity(orderID: order.id, activityID: "iphone")?.pushToken.hasPrefix("aabb") == true)
    }

    /// What cannot be delivered is refused with the field at fault, and nothing is stored.
    @Test func undeliverableRegistrationsAreRefused() throws {
        let api = try Self.harness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let cases: [([String: Any], String)] = [
            (["platform": "android", "pushToken": "has spaces in it, and commas"], "pushToken"),
            (["platform": "android", "pushToken": String(repeating: "x", count: 1025)], "pushToken"),
            (["platform": "android", "pushToken": Self.fcmToken, "firebaseProjectId": "another"], "firebaseProjectId"),
            (["platform": "android", "pushToken": Self.fcmToken, "environment": "production"], "environment"),
            (
                [
                    "pushToken": "aabbccddeeff00112233445566778899", "environment": "production",
                    "firebaseProjectId": "x",
                ],
                "firebaseProjectId"
            ),
            (["platform": "windows", "pushToken": Self.fcmToken], "platform"),
        ]
        for (body, field) in cases {
            let reply = try api.send("PUT", "/v1/orders/\(order.id)/activities/a", as: order.token, json: body)
            #expect(reply.status == 422 && reply.errorCode == "validation_failed", "\(body)")
            #expect(reply.fieldProblems[field] != nil, "\(body): \(reply.fieldProblems)")
        }
        #expect(try api.store.activity(orderID: order.id, activityID: "a") == nil)
    }

    /// Without an FCM service account no Android device is accepted: its pushes could never go out.
    @Test func withoutFCMAndroidDevicesAreRefused() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1", customer: "c-1")
        let reply = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/phone", as: order.token,
            json: ["platform": "android", "pushToken": Self.fcmToken])
        #expect(reply.status == 422 && reply.fieldProblems["platform"]?.contains("FCM") == true)
        let credential = try api.customerCredential(merchant, customer: "c-1").credential
        let device = try api.send(
            "PUT", "/v1/customers/c-1/push-to-start/pixel", as: credential,
            json: ["platform": "android", "pushToken": Self.fcmToken])
        #expect(device.status == 422 && device.fieldProblems["platform"] != nil)
        #expect(try api.store.activity(orderID: order.id, activityID: "phone") == nil)
    }
}
