import DeliveryActivityClient
import Foundation
import TestSupport
import Testing

/// Orders made through a running deliveryd's API, as a merchant app and a customer app would.
enum OrderFixtures {
    /// `count` orders numbered `prefix-0`…, each with one Live Activity `a` started by the customer's
    /// app with the order's current state and registered for production with the token `%064x` of
    /// `firstToken + index`.
    /// - Parameter merchantID: needed when `bearer` is an admin key (a merchant key implies its own).
    static func withActivities(
        port: UInt16, count: Int, bearer: String, numbered prefix: String, firstToken: Int,
        merchantID: String? = nil, eta: Date = Date().addingTimeInterval(1800)
    ) throws -> [(id: String, token: String)] {
        var orders: [(id: String, token: String)] = []
        for index in 0..<count {
            var body = EndToEndTests.orderBody("\(prefix)-\(index)", customer: "c-\(index)", eta: eta)
            if let merchantID { body["merchantId"] = merchantID }
            let created = try LoopbackHTTP.send(port: port, "POST", "/v1/orders", bearer: bearer, json: body)
            try #require(created.status == 201, "creating \(prefix)-\(index): \(created.status) \(created.text)")
            let id = (created.json["order"] as? [String: Any])?["id"] as? String ?? ""
            let token = String(format: "%064x", firstToken + index)
            let registered = try CustomerApp(port: port).startLocally(
                orderId: id, activityId: "a", hexToken: token, environment: .production,
                credential: created.json["trackingToken"] as? String ?? "")
            try #require(registered.status == 200, "registering \(prefix)-\(index): \(registered.text)")
            orders.append((id, token))
        }
        return orders
    }
}
