import Foundation
import Storage
import Testing

/// Pre-orders: an order due tomorrow starts its Live Activity an hour before it is due (iOS ends an
/// activity 8 hours after it starts), or when the merchant starts preparing it; a merchant may start
/// it at once.
@Suite("Pre-orders")
struct PreOrderTests {
    let api: APIHarness
    let merchant: String

    init() throws {
        api = try APIHarness()
        merchant = try api.key("merchant", merchant: "m-1")
        let credential = try api.customerCredential(merchant, customer: "c-42").credential
        let reply = try api.send(
            "PUT", "/v1/customers/c-42/push-to-start/phone", as: credential,
            json: ["pushToken": "aabbccddeeff00112233445566778899", "environment": "production"])
        try #require(reply.status == 200, "\(reply.json)")
    }

    /// An order of customer c-42 due `hence` from now.
    func order(due hence: TimeInterval, number: String = "P-1") throws -> String {
        var body = APIHarness.orderBody(number: number, now: api.now)
        body["estimatedArrival"] = APIHarness.rfc3339(api.now.addingTimeInterval(hence))
        let reply = try api.send("POST", "/v1/orders", as: merchant, json: body)
        try #require(reply.status == 201, "\(reply.json)")
        return try #require((reply.json["order"] as? [String: Any])?["id"] as? String)
    }

    /// The start pushes due by `time`, sent (so each comes once).
    func starts(by time: Date) throws -> [String] {
        let due = try api.store.claimDue(owner: "test", now: time, lease: 600, limit: 100)
        try api.store.completePushes(due.map { PushCompletion(item: $0, outcome: .sent) }, now: time)
        return due.filter { if case .start = $0.target { true } else { false } }.map(\.orderID)
    }

    /// The `startAt` of the order's Live Activity, in seconds from the harness's now.
    func startAt(_ orderID: String) throws -> TimeInterval? {
        let view = try api.send("GET", "/v1/orders/\(orderID)/live-activity", as: merchant).json
        return (view["startAt"] as? String).flatMap(APIHarness.parseTime).map { $0.timeIntervalSince(api.now) }
    }

    @Test func aPreOrderStartsItsLeadTimeBeforeItIsDue() throws {
        let tomorrow = try order(due: 24 * 3600)
        let soon = try order(due: 1800, number: "P-2")
        #expect(try starts(by: api.now.addingTimeInterval(1)) == [soon], "an order due within the hour starts now")
        #expect(try starts(by: api.now.addingTimeInterval(23 * 3600 - 1)).isEmpty)
        #expect(try starts(by: api.now.addingTimeInterval(23 * 3600)) == [tomorrow])

        // The ETA was sent in whole seconds: the start is within a second of 23 hours from now.
        let tomorrowStart = try startAt(tomorrow)
        #expect(tomorrowStart.map { abs($0 - 23 * 3600) < 1 } == true, "\(tomorrowStart ?? -1)")
        #expect(try startAt(soon).map { abs($0) < 0.01 } == true)
    }

    /// Preparing starts it at once; a moved ETA moves a start still waiting.
    @Test func preparingOrAMovedETAMovesTheStart() throws {
        let moved = try order(due: 24 * 3600)
        let prepared = try order(due: 24 * 3600, number: "P-2")
        let eta = try api.send(
            "PATCH", "/v1/orders/\(moved)/eta", as: merchant,
            json: ["estimatedArrival": APIHarness.rfc3339(api.now.addingTimeInterval(5 * 3600))])
        #expect(eta.status == 200)
        #expect(
            try api.send("POST", "/v1/orders/\(prepared)/status", as: merchant, json: ["status": "preparing"]).status
                == 200)
        #expect(try starts(by: api.now.addingTimeInterval(1)) == [prepared])
        #expect(try starts(by: api.now.addingTimeInterval(4 * 3600 - 1)).isEmpty)
        #expect(try starts(by: api.now.addingTimeInterval(4 * 3600)) == [moved])
        #expect(try startAt(prepared).map { abs($0) < 0.01 } == true, "a prepared order starts now")
    }

    /// The merchant starts a pre-order's activity now; again, nothing new is queued; once the start
    /// went out it is not sent twice; an ended order has nothing to start.
    @Test func aMerchantStartsTheActivityOnDemand() throws {
        let tomorrow = try order(due: 24 * 3600)
        let path = "/v1/orders/\(tomorrow)/live-activity/start"
        let started = try api.send("POST", path, as: merchant)
        #expect(started.status == 202 && started.json["queuedStarts"] as? Int == 1, "\(started.json)")
        let again = try api.send("POST", path, as: merchant)
        #expect(again.status == 202 && again.json["queuedStarts"] as? Int == 1, "a waiting start is replaced")
        let claimed = try api.store.claimDue(owner: "test", now: api.now.addingTimeInterval(1), lease: 600, limit: 100)
        #expect(claimed.map(\.orderID) == [tomorrow], "one start, due now")
        try api.store.completePushes(claimed.map { PushCompletion(item: $0, outcome: .sent) }, now: api.now)
        let afterSending = try api.send("POST", path, as: merchant)
        #expect(afterSending.json["queuedStarts"] as? Int == 0, "the phone has its activity: no second one")
        #expect(try api.store.outboxDepth().count == 0)

        #expect(
            try api.send("POST", "/v1/orders/\(tomorrow)/status", as: merchant, json: ["status": "cancelled"]).status
                == 200)
        let ended = try api.send("POST", path, as: merchant)
        #expect(ended.status == 409 && ended.errorCode == "order_closed")
        #expect(try startAt(tomorrow) == nil)
    }
}
