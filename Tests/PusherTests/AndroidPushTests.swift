import DeliveryActivityContract
import Foundation
import OrderDomain
import Pusher
import Storage
import Telemetry
import TestSupport
import Testing

/// The push worker's Android half against the FCM simulator: a SQLite store in a temporary
/// directory, real HTTP/2 over TLS on loopback, access tokens from the simulator's token endpoint.
@Suite("Push worker: Android devices through the FCM simulator", .serialized, .timeLimit(.minutes(3)))
struct AndroidPushTests {
    final class Setup {
        let directory = NSTemporaryDirectory() + "android-push-" + UUID().uuidString
        let store: Database
        let simulator: FCMSimulator
        let registry = MetricsRegistry()
        let pauses = FCMProjectPauses()
        let retryPolicy: RetryPolicy

        init(retryPolicy: RetryPolicy = RetryPolicy()) throws {
            self.retryPolicy = retryPolicy
            store = try Database.open(StorageConfiguration(dataDirectory: directory))
            simulator = try FCMSimulator()
        }

        deinit {
            simulator.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// A worker whose APNs side records nothing: every device here is an Android phone.
        /// - Parameter account: the service account's key file (default: the simulator's own account).
        func worker(withFCM: Bool = true, account json: [UInt8]? = nil) throws -> PushWorker {
            let account = try GoogleServiceAccount(json: json ?? simulator.serviceAccountJSON)
            let route = FCMRoute(
                baseURL: simulator.baseURL, sender: try FCMClient(caFile: simulator.caFile),
                tokens: FCMAccessTokens(account: account, exchange: CurlTokenExchange(caFile: simulator.caFile)))
            return PushWorker(
                store: store, sender: LogSender { _ in }, tokens: nil,
                configuration: modified(PusherConfiguration()) { $0.retryPolicy = retryPolicy },
                metrics: PushMetrics(registry: registry), logger: Logger(label: "test", minimumLevel: .error),
                fcm: withFCM ? route : nil, projectPauses: pauses)
        }

        func register(
            _ activityID: String, token: String, project: String = FCMSimulator.projectID, at time: Date = Date(),
            order: String = "o-1"
        ) throws {
            _ = try store.registerActivity(
                orderID: order, activityID: activityID, pushToken: token, environment: .production,
                bundleID: project, platform: .android, shown: nil, now: time)
        }

        func set(_ status: OrderStatus, at time: Date = Date(), order: String = "o-1") throws {
            _ = try store.change(orderID: order, now: time) { current throws(OrderError) in
                try current.applying(StatusChange(status: status), by: .admin, at: time)
            }
        }

        /// The messages FCM accepted, in order: each one's data map.
        func delivered(to device: String) throws -> [[String: String]] {
            try simulator.records().filter {
                $0["kind"] as? String == "send" && $0["token"] as? String == device && $0["status"] as? Int == 200
            }.map { record in
                let body = try JSONSerialization.jsonObject(with: Data((record["body"] as? String ?? "").utf8))
                let message = (body as? [String: Any])?["message"] as? [String: Any]
                return message?["data"] as? [String: String] ?? [:]
            }
        }

        func metric(_ name: String) -> Double {
            registry.prometheusText().split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        }
    }

    /// An Android activity gets each state once, in order, with growing versions, then the end with
    /// when to dismiss it; the end removes its token; the push log says FCM answered.
    @Test func anAndroidActivityGetsEveryStateOnceAndItsEnd() async throws {
        let setup = try Setup()
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        try setup.register("phone", token: "fcm-phone-token")
        let worker = try setup.worker()
        var clock = Date()
        #expect(try await worker.runOnce(now: clock) == 1)
        for status in [OrderStatus.preparing, .pickup, .delivering, .delivered] {
            try setup.set(status)
            try setup.set(status)  // a repeated change pushes nothing more
            clock += 2  // past the spacing FCM's per-device limits ask for
            #expect(try await worker.runOnce(now: clock) == 1)
        }
        let messages = try setup.delivered(to: "fcm-phone-token")
        let states = messages.compactMap { data -> String? in
            let state = try? JSONSerialization.jsonObject(with: Data((data["state"] ?? "").utf8))
            return (state as? [String: Any])?["status"] as? String
        }
        #expect(states == ["placed", "preparing", "pickup", "delivering", "delivered"])
        #expect(messages.map { $0["event"] } == ["update", "update", "update", "update", "end"])
        let versions = messages.compactMap { $0["version"].flatMap { Int64($0) } }
        #expect(versions.count == 5 && zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 })
        #expect(messages.last?["dismissAt"] != nil && messages.dropLast().allSatisfy { $0["dismissAt"] == nil })
        #expect(!messages.contains { $0.values.contains { $0.contains("+49") || $0.contains("Somewhere") } })

        let activity = try #require(try setup.store.activity(orderID: "o-1", activityID: "phone"))
        #expect(activity.endedReason == "ended" && activity.pushToken.isEmpty && activity.platform == .android)
        let log = try setup.store.pushLog(orderID: "o-1")
        #expect(log.count == 5 && log.allSatisfy { $0.platform == .android && $0.httpStatus == 200 })
        #expect(log.allSatisfy { $0.apnsID?.hasPrefix("projects/\(FCMSimulator.projectID)/messages/") == true })
        #expect(setup.metric(#"deliveryd_pushes_total{platform="android",event="update",result="accepted"}"#) == 4)
        #expect(setup.metric(#"deliveryd_pushes_total{platform="android",event="end",result="accepted"}"#) == 1)
    }

    /// FCM's answers, each handled as its error table says: a dead or malformed token ends its
    /// activity; `QUOTA_EXCEEDED` waits the `Retry-After` FCM gave; `UNAVAILABLE` is retried with the
    /// pusher's backoff; none of them touches the healthy device beside them.
    @Test func fcmAnswersRemoveRetryOrWait() async throws {
        let setup = try Setup()
        try setup.simulator.script([
            "fcm-unregistered": ["status": 404, "code": "UNREGISTERED"],
            "fcm-invalid": ["invalid_token": true],
            "fcm-quota": ["status": 429, "code": "QUOTA_EXCEEDED", "retry_after": 120],
            "fcm-unavailable": ["status": 503, "code": "UNAVAILABLE"],
        ])
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        for name in ["unregistered", "invalid", "quota", "unavailable", "healthy"] {
            try setup.register(name, token: "fcm-" + name)
        }
        let now = Date()
        #expect(try await setup.worker().runOnce(now: now) == 5)

        #expect(try setup.store.activity(orderID: "o-1", activityID: "unregistered")?.endedReason == "UNREGISTERED")
        #expect(try setup.store.activity(orderID: "o-1", activityID: "invalid")?.endedReason == "INVALID_ARGUMENT")
        #expect(try setup.store.activity(orderID: "o-1", activityID: "healthy")?.endedAt == nil)
        #expect(try setup.store.activity(orderID: "o-1", activityID: "quota")?.endedAt == nil)
        // Back when FCM said, not before; the unavailable one within the first backoff.
        let early = try setup.store.claimDue(owner: "probe", now: now.addingTimeInterval(110), lease: 60, limit: 10)
        #expect(early.map(\.target) == [.activity(activityID: "unavailable")])
        let late = try setup.store.claimDue(owner: "probe", now: now.addingTimeInterval(125), lease: 60, limit: 10)
        #expect(late.map(\.target) == [.activity(activityID: "quota")])
        #expect(setup.metric(#"deliveryd_push_failures_total{platform="android",reason="QUOTA_EXCEEDED"}"#) == 1)
        #expect(setup.metric(#"deliveryd_pushes_total{platform="android",event="update",result="token_removed"}"#) == 2)
        #expect(setup.metric(#"deliveryd_pushes_total{platform="android",event="update",result="retried"}"#) == 2)
    }

    /// A sender the project refuses (`SENDER_ID_MISMATCH`: the device's app belongs to another
    /// Firebase project) pauses that project: its rows wait, unsent, until the pause ends, while
    /// devices of the service account's own project keep receiving.
    @Test func aRefusedProjectIsPausedNotItsDevices() async throws {
        let setup = try Setup()
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        try setup.register("foreign", token: "fcm-foreign", project: "someone-elses-project")
        try setup.register("own", token: "fcm-own")
        let worker = try setup.worker()
        let now = Date()
        #expect(try await worker.runOnce(now: now) == 2)
        let paused = try #require(setup.pauses.pausedUntil("someone-elses-project", now: now))
        #expect(setup.pauses.pausedUntil(FCMSimulator.projectID, now: now) == nil)
        #expect(
            try setup.store.activity(orderID: "o-1", activityID: "foreign")?.endedAt == nil, "not the token's fault")

        try setup.set(.preparing)
        // Both rows are due again; the paused project's waits for the pause's end, unsent.
        #expect(try await worker.runOnce(now: now.addingTimeInterval(1)) == 2)
        #expect(try setup.delivered(to: "fcm-own").count == 2)
        let refusals = try setup.simulator.records().filter { $0["token"] as? String == "fcm-foreign" }
        #expect(refusals.count == 1, "nothing more was sent while paused")
        let due = try setup.store.claimDue(owner: "probe", now: paused.addingTimeInterval(1), lease: 1, limit: 10)
        #expect(due.map(\.target) == [.activity(activityID: "foreign")])
        #expect(
            setup.metric(
                #"deliveryd_fcm_project_pauses_total{project="someone-elses-project",reason="SENDER_ID_MISMATCH"}"#)
                == 1)
    }

    /// A customer's Android phone registered ahead of orders: the order's start reaches it as its
    /// first update, and the phone becomes an activity of the order, so later changes reach it with
    /// no registration from the app; such a start never counts as stalled.
    @Test func anAndroidStartMakesTheDeviceAnActivity() async throws {
        let setup = try Setup()
        let device = DeviceKey(merchantID: "m-1", customerID: "c-1", deviceID: "pixel")
        try setup.store.registerPushToStart(
            device, credentialID: "dc-1", pushToken: "fcm-pixel", environment: .production,
            bundleID: FCMSimulator.projectID, platform: .android, now: Date())
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        let worker = try setup.worker()
        #expect(try await worker.runOnce(now: Date()) == 1)
        let activity = try #require(try setup.store.activity(orderID: "o-1", activityID: "android:pixel"))
        #expect(activity.platform == .android && activity.pushToken == "fcm-pixel")
        #expect(activity.shown?.status == .placed)
        // The update queued with the activity finds nothing new to say.
        #expect(try await worker.runOnce(now: Date()) == 1)
        try setup.set(.preparing)
        #expect(try await worker.runOnce(now: Date().addingTimeInterval(2)) == 1)
        let messages = try setup.delivered(to: "fcm-pixel")
        #expect(messages.compactMap { $0["state"] }.map { $0.contains(#""status":"placed""#) } == [true, false])
        #expect(messages.last?["state"]?.contains(#""status":"preparing""#) == true)
        #expect(try setup.store.markStalledStarts(sentBefore: Date().addingTimeInterval(60), now: Date()).isEmpty)
    }

    /// Changes faster than FCM's per-device limits allow (240 a minute, 5,000 an hour) are spaced a
    /// second apart per device: a change within the second waits, and what changes meanwhile goes out
    /// as one message with the newest state.
    @Test func rapidChangesAreSpacedAndCoalesced() async throws {
        let setup = try Setup()
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        // A clock of the test's own, on a whole second, never ahead of the real one by more than a
        // second (the token endpoint refuses an assertion issued in the future).
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        try setup.register("phone", token: "fcm-phone", at: start.addingTimeInterval(-1))
        let worker = try setup.worker()
        #expect(try await worker.runOnce(now: start) == 1)
        #expect(try setup.store.activity(orderID: "o-1", activityID: "phone")?.shown?.timestamp == start)
        try setup.set(.preparing, at: start.addingTimeInterval(0.2))
        #expect(try await worker.runOnce(now: start.addingTimeInterval(0.5)) == 1, "claimed, and put back")
        try setup.set(.pickup, at: start.addingTimeInterval(0.6))
        _ = try await worker.runOnce(now: start.addingTimeInterval(0.7))
        #expect(try setup.delivered(to: "fcm-phone").count == 1, "nothing within the second")
        #expect(try await worker.runOnce(now: start.addingTimeInterval(1.2)) == 1)
        #expect(try await worker.runOnce(now: start.addingTimeInterval(5)) == 0)
        let states = try setup.delivered(to: "fcm-phone").compactMap { $0["state"] }
        #expect(states.count == 2 && states[1].contains(#""status":"pickup""#), "\(states)")
    }

    /// A device registered while FCM was configured, pushed by a deliveryd that no longer has it: the
    /// push is a dead letter that says why and which platform, to replay once FCM is set again.
    @Test func withoutFCMAnAndroidPushIsADeadLetter() async throws {
        let setup = try Setup()
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        try setup.register("phone", token: "fcm-phone")
        #expect(try await setup.worker(withFCM: false).runOnce(now: Date()) == 1)
        let letter = try #require(try setup.store.deadLetters().first)
        #expect(letter.reason == "fcm_not_configured" && letter.platform == .android)
        #expect(try setup.store.replayDeadLetters(ids: nil, now: Date()) == 1)
        #expect(try await setup.worker().runOnce(now: Date()) == 1)
        #expect(try setup.delivered(to: "fcm-phone").count == 1, "sent once FCM is back")
    }

    /// A service account the token endpoint refuses (its key is not the account's) is the
    /// configuration's fault: the project is paused, its rows wait unsent for the pause's end, and
    /// no device is blamed.
    @Test func aRefusedServiceAccountPausesTheProject() async throws {
        let setup = try Setup()
        let other = try FCMSimulator()
        defer { other.stop() }
        var json = try JSONSerialization.jsonObject(with: Data(other.serviceAccountJSON)) as? [String: Any] ?? [:]
        json["token_uri"] = setup.simulator.tokenURL
        json["project_id"] = FCMSimulator.projectID
        let impostor = Array(try JSONSerialization.data(withJSONObject: json))
        try createOrder(in: setup.store, id: "o-1", number: "A-1", at: Date())
        try setup.register("phone", token: "fcm-phone")
        let now = Date()
        #expect(try await setup.worker(account: impostor).runOnce(now: now) == 1)
        let paused = try #require(setup.pauses.pausedUntil(FCMSimulator.projectID, now: now))
        #expect(try setup.simulator.records().allSatisfy { $0["kind"] as? String != "send" }, "nothing sent")
        #expect(try setup.store.activity(orderID: "o-1", activityID: "phone")?.endedAt == nil)
        let due = try setup.store.claimDue(owner: "probe", now: paused.addingTimeInterval(1), lease: 60, limit: 10)
        #expect(due.map(\.target) == [.activity(activityID: "phone")])
        #expect(
            setup.metric(
                #"deliveryd_fcm_project_pauses_total{project="deliveryd-test",reason="access_token_refused"}"#) == 1)
    }

    /// One phone following two orders is one device to FCM: its messages are spaced a second apart
    /// whichever order they belong to, in one batch and across batches.
    @Test func twoOrdersOnOnePhoneShareItsSpacing() async throws {
        let setup = try Setup()
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        for order in ["o-1", "o-2"] {
            try createOrder(in: setup.store, id: order, number: "N-" + order, at: start.addingTimeInterval(-1))
            try setup.register("phone", token: "fcm-shared", at: start.addingTimeInterval(-1), order: order)
        }
        let worker = try setup.worker()
        #expect(try await worker.runOnce(now: start) == 2, "both claimed")
        #expect(try setup.delivered(to: "fcm-shared").count == 1, "one message in the second")
        #expect(try await worker.runOnce(now: start.addingTimeInterval(1.2)) == 1)
        #expect(try setup.delivered(to: "fcm-shared").count == 2)
        // The first order changes: its own last message is a second and a half old, the phone's not.
        try setup.set(.preparing, at: start.addingTimeInterval(1.3), order: "o-1")
        #expect(try await worker.runOnce(now: start.addingTimeInterval(1.5)) == 1, "claimed, and put back")
        #expect(try setup.delivered(to: "fcm-shared").count == 2)
        #expect(try await worker.runOnce(now: start.addingTimeInterval(2.2)) == 1)
        let orders = try setup.delivered(to: "fcm-shared").compactMap { data -> String? in
            let attributes = try? JSONSerialization.jsonObject(with: Data((data["attributes"] ?? "").utf8))
            return (attributes as? [String: Any])?["orderId"] as? String
        }
        #expect(Set(orders.prefix(2)) == ["o-1", "o-2"] && orders.last == "o-1" && orders.count == 3)
    }
}
