import DeliveryAPI
import Foundation
import Storage
import TestSupport
import Testing

/// Remote starts that stall: APNs accepted the push-to-start, but no update token ever came (the
/// customer turned Live Activities off, iOS did not wake the app). Such an activity would show
/// "placed" for good; deliveryd notices and says so.
@Suite("Stalled remote starts")
struct StalledStartTests {
    let clock = ManualClock(Date())
    let directory = NSTemporaryDirectory() + "stalled-" + UUID().uuidString
    let store: any DeliveryStore
    let service: DeliveryService
    let api: APIHarness
    let merchant: String

    init() throws {
        store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: clock.now))
        let clock = self.clock
        service = DeliveryService(
            store: store,
            configuration: modified(DeliveryServiceConfiguration(defaultBundleID: "com.example.app")) {
                $0.startRegistrationTimeout = 120
            },
            clock: { clock.now })
        api = try APIHarness(router: service.router(), store: store, directory: directory)
        merchant = try api.key("merchant", merchant: "m-1")
        let credential = try api.customerCredential(merchant, customer: "c-42").credential
        let device = try api.send(
            "PUT", "/v1/customers/c-42/push-to-start/phone", as: credential,
            json: ["pushToken": "aabbccddeeff00112233445566778899", "environment": "production"])
        try #require(device.status == 200, "\(device.json)")
    }

    /// An order whose start APNs accepted now.
    func orderWithAcceptedStart(_ number: String) throws -> (id: String, token: String) {
        let order = try api.createOrder(merchant, number: number)
        let starts = try store.claimDue(owner: "test", now: clock.now, lease: 60, limit: 10)
        try #require(starts.count == 1)
        try store.completePushes(starts.map { PushCompletion(item: $0, outcome: .sent) }, now: clock.now)
        return order
    }

    @Test func aStartWithoutAnUpdateTokenIsReportedOnce() throws {
        let stalled = try orderWithAcceptedStart("S-1").id
        let (registered, token) = try orderWithAcceptedStart("S-2")
        let tracking = try api.send(
            "PUT", "/v1/orders/\(registered)/activities/pushed-1", as: token,
            json: ["pushToken": String(repeating: "ab", count: 32), "environment": "production"])
        #expect(tracking.status == 200, "\(tracking.json)")

        clock.advance(119)
        #expect(service.sweepStalledStarts() == 0, "not before the timeout")
        clock.advance(2)
        #expect(service.sweepStalledStarts() == 1)
        #expect(service.sweepStalledStarts() == 0, "each stalled start is reported once")

        let log = try api.send("GET", "/v1/orders/\(stalled)/pushes", as: merchant).json["pushes"] as? [[String: Any]]
        #expect(log?.last?["reason"] as? String == "NoUpdateTokenRegistered", "\(log ?? [])")
        let other = try api.send("GET", "/v1/orders/\(registered)/pushes", as: merchant).json["pushes"]
        #expect((other as? [[String: Any]])?.contains { $0["reason"] as? String == "NoUpdateTokenRegistered" } == false)
        let metrics = String(decoding: try api.send("GET", "/metrics", as: APIHarness.adminKey).body, as: UTF8.self)
        #expect(metrics.contains(#"deliveryd_stalled_remote_starts_total{app="com.example.app"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"deliveryd_live_activity_events_total{event="start_stalled"} 1"#))
    }
}
