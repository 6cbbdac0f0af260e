import DeliveryAPI
import Foundation
import Storage
import TestSupport
import Testing

/// The service with the default limits as `adjust` leaves them, and a clock that stands still:
/// buckets refill only when the test says.
private func harness(
    clock: TestClock = TestClock(Date()), adjust: (inout RateLimits) -> Void = { _ in }
) throws -> APIHarness {
    let directory = NSTemporaryDirectory() + "api-limits-" + UUID().uuidString
    let store = try TestStore.open(directory)
    try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: clock.now))
    var configuration = DeliveryServiceConfiguration(defaultBundleID: "com.example.app")
    adjust(&configuration.rateLimits)
    return try APIHarness(
        router: DeliveryService(
            store: store, configuration: configuration,
            clock: { clock.now }
        ).router(), store: store, directory: directory)
}

@Suite("Rate limits")
struct RateLimitTests {
    /// 20 failed authentications from one address, then its failures are `429` with `Retry-After`;
    /// a right key and a right tracking token from that address still get in (a shared address
    /// locks out no one innocent), and other addresses are answered as ever.
    @Test func failedAuthenticationsPerAddress() throws {
        let clock = TestClock(Date())
        let api = try harness(clock: clock)
        for attempt in 0..<20 {
            // Tracking-token guesses name no key id: only the address's limit applies.
            let guess = try api.send("GET", "/v1/admin/keys", as: "dt_guess\(attempt)", from: "10.0.0.1")
            #expect(guess.status == 401)
        }
        let limited = try api.send("GET", "/v1/admin/keys", as: "dt_guess20", from: "10.0.0.1")
        #expect(limited.status == 429 && limited.errorCode == "rate_limited" && limited.header("Retry-After") == "3")
        #expect(try api.send("GET", "/v1/admin/keys", as: APIHarness.adminKey, from: "10.0.0.1").status == 200)
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: order.token, from: "10.0.0.1").status == 200)
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: merchant, from: "10.0.0.1").status == 200)
        #expect(try api.send("GET", "/v1/admin/keys", as: "dt_guess21", from: "10.0.0.2").status == 401)
        clock.advance(3)
        #expect(try api.send("GET", "/v1/admin/keys", as: "dt_guess22", from: "10.0.0.1").status == 401)
        let metrics = try api.send("GET", "/metrics", as: APIHarness.adminKey)
        #expect(
            String(decoding: metrics.body, as: UTF8.self).contains(
                #"deliveryd_rate_limited_total{limit="failed_authentications_per_address"} 1"#))
    }

    /// Guesses at one key id from many addresses are refused with `429` past the key's limit, while
    /// the key itself keeps working: an attacker cannot lock its owner out.
    @Test func failedAuthenticationsPerKey() throws {
        let api = try harness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let keyID = String(merchant.split(separator: "_")[1])
        var statuses: [Int] = []
        for attempt in 0..<12 {
            statuses.append(
                try api.send("GET", "/v1/orders/o-1", as: "dk_\(keyID)_wrong\(attempt)", from: "10.1.0.\(attempt)")
                    .status)
        }
        #expect(statuses == Array(repeating: 401, count: 10) + [429, 429])
        #expect(try api.send("GET", "/v1/orders/o-1", as: merchant, from: "10.1.0.99").status == 404)
    }

    /// One credential past its request rate gets `429`; another credential is answered normally.
    @Test func requestsPerKey() throws {
        let api = try harness { $0.requestsPerKey = RateLimit(burst: 5, perSecond: 0.5) }
        let busy = try api.key("merchant", merchant: "m-1")
        let calm = try api.key("merchant", merchant: "m-2")
        let statuses = try (0..<7).map { _ in try api.send("GET", "/v1/orders/o-1", as: busy).status }
        #expect(statuses == [404, 404, 404, 404, 404, 429, 429])
        let limited = try api.send("GET", "/v1/orders/o-1", as: busy)
        #expect(limited.errorCode == "rate_limited" && limited.header("Retry-After") == "2")
        #expect(try api.send("GET", "/v1/orders/o-1", as: calm).status == 404)
    }

    /// The defaults share the machine: a merchant key gets 200 at once, then `429`, while another
    /// merchant is served; the credentials of one phone (tracking token, rider key, customer
    /// credential) get 20 at once, each its own bucket, and the merchant behind them is unaffected.
    @Test func defaultsGiveEachTenantAShare() throws {
        let api = try harness()
        let busy = try api.key("merchant", merchant: "m-1")
        let calm = try api.key("merchant", merchant: "m-2")
        let order = try api.createOrder(busy, number: "A-1")
        let rider = try api.key("rider", merchant: "m-1", rider: "r-1")
        #expect(
            try api.send("PUT", "/v1/orders/\(order.id)/rider", as: busy, json: ["riderId": "r-1", "name": "Sam"])
                .status
                == 200)
        let account = try api.customerCredential(busy, customer: "c-42").credential
        // Three requests of the key so far: creating the order, assigning the rider, minting the credential.
        let keyStatuses = try (0..<198).map { _ in try api.send("GET", "/v1/orders/\(order.id)", as: busy).status }
        #expect(keyStatuses == Array(repeating: 200, count: 197) + [429])
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: calm).status == 404)
        let phone: [(String, String)] = [
            (order.token, "/v1/orders/\(order.id)/live-activity"), (rider, "/v1/orders/\(order.id)"),
            (account, "/v1/customers/c-42/push-to-start/d-1"),
        ]
        for (credential, path) in phone {
            let method = credential == account ? "DELETE" : "GET"
            let statuses = try (0..<21).map { _ in try api.send(method, path, as: credential).status }
            #expect(statuses.prefix(20).allSatisfy { $0 != 429 } && statuses.last == 429, "\(path): \(statuses)")
        }
        let limited = try api.send("GET", "/v1/orders/\(order.id)/live-activity", as: order.token)
        #expect(limited.errorCode == "rate_limited" && limited.header("Retry-After") == "1")
    }

    /// Rotating an activity's token over and over is limited per order: past the burst `429`, with
    /// nothing stored or pushed; another order is answered as ever, and an hour refills it.
    @Test func registrationsPerOrderOverTime() throws {
        let clock = TestClock(Date())
        let api = try harness(clock: clock) {
            $0.registrationsPerOrder = RateLimit(burst: 3, perSecond: 3.0 / 3600)
        }
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let other = try api.createOrder(merchant, number: "A-2")
        func register(_ id: String, _ token: String, _ hex: String) throws -> Int {
            try api.send(
                "PUT", "/v1/orders/\(id)/activities/a-1", as: token,
                json: ["pushToken": String(repeating: hex, count: 32), "environment": "production"]
            ).status
        }
        let statuses = try ["a1", "a2", "a3", "a4", "a5"].map { try register(order.id, order.token, $0) }
        #expect(statuses == [200, 200, 200, 429, 429])
        let stored = try api.store.activity(orderID: order.id, activityID: "a-1")
        #expect(stored?.pushToken == String(repeating: "a3", count: 32), "the refused tokens were not stored")
        #expect(try register(other.id, other.token, "b1") == 200)
        clock.advance(1200)
        #expect(try register(order.id, order.token, "a6") == 200)
    }

    /// An order takes a bounded number of live activities (rotations and replacements of ended ones
    /// do not count), a customer a bounded number of devices; past them `429`, and nothing stored.
    @Test func registrationsAreCapped() throws {
        let api = try harness {
            $0.activitiesPerOrder = 2
            $0.devicesPerCustomer = 1
        }
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        func register(_ activity: String, _ token: String) throws -> APIHarness.Reply {
            try api.send(
                "PUT", "/v1/orders/\(order.id)/activities/\(activity)", as: order.token,
                json: ["pushToken": token, "environment": "production"])
        }
        #expect(try register("a", String(repeating: "a", count: 32)).status == 200)
        #expect(try register("b", String(repeating: "b", count: 32)).status == 200)
        let third = try register("c", String(repeating: "c", count: 32))
        #expect(third.status == 429 && third.errorCode == "rate_limited")
        #expect(try api.store.activity(orderID: order.id, activityID: "c") == nil)
        #expect(try register("b", String(repeating: "d", count: 32)).status == 200)
        #expect(try api.send("DELETE", "/v1/orders/\(order.id)/activities/a", as: order.token).status == 204)
        #expect(try register("c", String(repeating: "c", count: 32)).status == 200)

        let account = try api.customerCredential(merchant, customer: "c-42")
        func device(_ id: String) throws -> Int {
            try api.send(
                "PUT", "/v1/customers/c-42/push-to-start/\(id)", as: account.credential,
                json: ["pushToken": String(repeating: "e", count: 32), "environment": "production"]
            ).status
        }
        #expect(try device("d-1") == 200)
        #expect(try device("d-2") == 429)
        #expect(try device("d-1") == 200)
    }
}
