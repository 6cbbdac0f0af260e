import Foundation
import Storage
import TestSupport
import Testing

@testable import DeliveryAPI

/// What support staff and the dashboard read: an order found by number or id with its timeline,
/// and the stats endpoint's history, sending state and per-merchant breakdown.
@Suite("Support and dashboard API")
struct SupportAPITests {
    @Test func searchFindsAnOrderByNumberOrIdAcrossMerchants() throws {
        let api = try APIHarness()
        let first = try api.key("merchant", merchant: "m-1")
        let second = try api.key("merchant", merchant: "m-2")
        let mine = try api.createOrder(first, number: "1001")
        let theirs = try api.createOrder(second, number: "1001")
        _ = try api.createOrder(first, number: "1002")

        let byNumber = try api.send("GET", "/v1/admin/orders?q=1001", as: APIHarness.adminKey)
        #expect(byNumber.status == 200)
        let found = (byNumber.json["orders"] as? [[String: Any]] ?? []).compactMap {
            ($0["order"] as? [String: Any])?["id"] as? String
        }
        #expect(Set(found) == [mine.id, theirs.id])

        let byID = try api.send("GET", "/v1/admin/orders?q=\(mine.id)", as: APIHarness.adminKey)
        let orders = byID.json["orders"] as? [[String: Any]] ?? []
        #expect(orders.count == 1)
        let order = orders.first?["order"] as? [String: Any] ?? [:]
        #expect(order["number"] as? String == "1001" && order["merchantId"] as? String == "m-1")
        // A support view, not a customer record: no phone, address, payment or note.
        let text = String(decoding: byID.body, as: UTF8.self)
        for secret in ["1234567", "Hauptstr", "4242", "ring twice", "Ana"] {
            #expect(!text.contains(secret), "the search answer shows \(secret)")
        }

        let nothing = try api.send("GET", "/v1/admin/orders?q=nope", as: APIHarness.adminKey)
        #expect(nothing.status == 200 && (nothing.json["orders"] as? [Any])?.isEmpty == true)
        // Spaces and percent-encoding are decoded; an empty or unknown query is refused, by name.
        #expect(try api.send("GET", "/v1/admin/orders?q=%20%31001+", as: APIHarness.adminKey).status == 200)
        let empty = try api.send("GET", "/v1/admin/orders?q=", as: APIHarness.adminKey)
        #expect(empty.status == 422 && empty.fieldProblems["q"] != nil)
        #expect(try api.send("GET", "/v1/admin/orders", as: APIHarness.adminKey).status == 422)
        let unknown = try api.send("GET", "/v1/admin/orders?q=1&limit=3", as: APIHarness.adminKey)
        #expect(unknown.status == 422 && unknown.fieldProblems["query"] != nil)
        let twice = try api.send("GET", "/v1/admin/orders?q=1&q=2", as: APIHarness.adminKey)
        #expect(twice.status == 422 && twice.fieldProblems["q"] != nil)
        let broken = try api.send("GET", "/v1/admin/orders?q=%FF", as: APIHarness.adminKey)
        #expect(broken.status == 422 && broken.errorCode == "validation_failed")
        let long = try api.send(
            "GET", "/v1/admin/orders?q=" + String(repeating: "x", count: 201), as: APIHarness.adminKey)
        #expect(long.status == 422)
        #expect(try api.send("GET", "/v1/admin/orders?q=1001", as: first).status == 403)
    }

    /// The timeline lists the status changes oldest first, each with who made it.
    @Test func timelineListsStatusChangesInOrder() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "T-1")
        for status in ["preparing", "pickup"] {
            #expect(
                try api.send("POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": status]).status
                    == 200)
        }
        let reply = try api.send("GET", "/v1/orders/\(order.id)/timeline", as: merchant)
        #expect(reply.status == 200)
        let timeline = reply.json["timeline"] as? [[String: Any]] ?? []
        #expect(timeline.map { $0["type"] as? String } == ["status", "status", "status"])
        #expect(timeline.map { $0["to"] as? String } == ["placed", "preparing", "pickup"])
        #expect(timeline.allSatisfy { $0["actor"] as? String == "merchant:m-1" })
        #expect((reply.json["order"] as? [String: Any])?["status"] as? String == "pickup")
        let other = try api.key("merchant", merchant: "m-2")
        #expect(try api.send("GET", "/v1/orders/\(order.id)/timeline", as: other).status == 404)
    }

    /// The history is served on request, whole or from a time on, and the page's query is checked.
    @Test func statsServeTheHistoryOnRequest() throws {
        let api = try APIHarness()
        let plain = try api.send("GET", "/v1/admin/stats", as: APIHarness.adminKey)
        #expect(plain.status == 200 && plain.json["history"] == nil)
        let node = plain.json["node"] as? [String: Any]
        #expect(node?["name"] as? String == "deliveryd")
        // The build, which the dashboard's header names (the harness's service: an unknown one).
        #expect(node?["version"] as? String == "unknown" && node?["commit"] as? String == "unknown")
        #expect(node?["built"] as? String == "unknown")
        #expect((plain.json["sending"] as? [String: Any])?["sender"] as? String == "log")
        #expect(plain.json["merchants"] as? [Any] != nil)

        let all = try api.send("GET", "/v1/admin/stats?history=all", as: APIHarness.adminKey)
        let history = all.json["history"] as? [String: Any]
        let tiers = history?["tiers"] as? [[String: Any]] ?? []
        #expect(tiers.map { $0["name"] as? String } == ["fine", "coarse"])
        #expect(tiers.map { $0["capacity"] as? Int } == [360, 1440])

        for bad in ["history=some", "historySince=yesterday", "historySince=-5", "history=all&history=all", "x=1"] {
            let reply = try api.send("GET", "/v1/admin/stats?\(bad)", as: APIHarness.adminKey)
            #expect(reply.status == 422 && reply.errorCode == "validation_failed", "\(bad)")
        }
        for polled in ["historySince=0", "history=all&historySince=0"] {
            let since = try api.send("GET", "/v1/admin/stats?\(polled)", as: APIHarness.adminKey)
            #expect(since.status == 200 && since.json["history"] != nil, "\(polled)")
        }
    }

    /// With snapshots kept, an admin's stats come from memory (the event loop) once the snapshots
    /// and the key are held, byte for byte what the pool answers; anything that would read the
    /// store or build (an unknown or wrong credential, a tracking token, `historySince`) goes to the
    /// pool, and refusals that need nothing more are given at once.
    @Test func statsComeFromMemoryOnlyWhenEverythingIsHeld() throws {
        var configuration = DeliveryServiceConfiguration(defaultBundleID: "com.example.app")
        configuration.statsMaximumAge = 600
        let directory = NSTemporaryDirectory() + "api-" + UUID().uuidString
        let store = try TestStore.open(directory)
        let now = Date()
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: now))
        let service = DeliveryService(store: store, configuration: configuration, clock: { now })
        let api = try APIHarness(router: service.router(), store: store, directory: directory)
        let path = "/v1/admin/stats?history=all"
        #expect(api.sendFromMemory("GET", path, as: APIHarness.adminKey) == nil, "nothing held yet")
        let pooled = try api.send("GET", path, as: APIHarness.adminKey)
        #expect(pooled.status == 200 && pooled.json["history"] != nil)
        let remembered = try #require(api.sendFromMemory("GET", path, as: APIHarness.adminKey))
        #expect(remembered.status == 200 && remembered.body == pooled.body)
        #expect(remembered.header("Cache-Control") == "no-store")
        #expect(api.sendFromMemory("GET", "/v1/admin/stats", as: APIHarness.adminKey)?.body.count ?? 0 > 2)

        // A periodic poll's few newest samples come from memory; more than that goes to the pool.
        let millisecond = Int64((now.timeIntervalSince1970 * 1000).rounded())
        service.recordHistorySample(now: now)
        let poll = api.sendFromMemory("GET", "/v1/admin/stats?historySince=\(millisecond - 1)", as: APIHarness.adminKey)
        let polledTiers = (poll?.json["history"] as? [String: Any])?["tiers"] as? [[String: Any]]
        #expect(polledTiers?.map { ($0["timesMs"] as? [Any])?.count } == [1, 1])
        for _ in 0..<DeliveryService.recentSamplesFromMemory { service.recordHistorySample(now: now) }
        #expect(
            api.sendFromMemory("GET", "/v1/admin/stats?historySince=\(millisecond - 1)", as: APIHarness.adminKey) == nil
        )
        #expect(
            api.sendFromMemory("GET", "/v1/admin/stats?historySince=\(millisecond)", as: APIHarness.adminKey)?.status
                == 200)
        #expect(api.sendFromMemory("GET", "/v1/admin/stats?history=some", as: APIHarness.adminKey)?.status == 422)
        #expect(api.sendFromMemory("GET", path, as: APIHarness.adminKey + "x") == nil, "a wrong secret")
        #expect(try api.send("GET", path, as: APIHarness.adminKey + "x").status == 401)

        let merchant = try api.key("merchant", merchant: "m-1")
        #expect(api.sendFromMemory("GET", path, as: merchant) == nil, "a key not read yet")
        #expect(try api.send("GET", path, as: merchant).status == 403)
        #expect(api.sendFromMemory("GET", path, as: merchant)?.status == 403)
        let order = try api.createOrder(merchant, number: "1")
        #expect(api.sendFromMemory("GET", path, as: order.token) == nil)
        #expect(try api.send("GET", path, as: order.token).status == 403)
    }

    /// Each merchant's open orders, most first.
    @Test func merchantsAreBrokenDown() throws {
        let api = try APIHarness()
        let first = try api.key("merchant", merchant: "m-1")
        let second = try api.key("merchant", merchant: "m-2")
        _ = try api.createOrder(first, number: "1")
        _ = try api.createOrder(second, number: "1")
        let closed = try api.createOrder(second, number: "2")
        _ = try api.createOrder(second, number: "3")
        #expect(
            try api.send("POST", "/v1/orders/\(closed.id)/status", as: second, json: ["status": "cancelled"]).status
                == 200)
        let stats = try api.send("GET", "/v1/admin/stats", as: APIHarness.adminKey)
        let merchants = stats.json["merchants"] as? [[String: Any]] ?? []
        #expect(merchants.map { $0["merchantId"] as? String } == ["m-2", "m-1"])
        #expect(merchants.map { $0["openOrders"] as? Int } == [2, 1])
    }
}
