import DeliveryActivityContract
public import Foundation
import HTTPServer
import OrderDomain
import Storage
import Telemetry

extension DeliveryService {
    /// The most orders one search answers: a number repeats at most once per merchant.
    static let searchLimit = 10

    /// `GET /v1/admin/orders?q=TEXT`: the orders whose id or number is `TEXT`, each with its
    /// timeline, for support staff answering a customer. Admins only; no customer data in it.
    func searchOrders(_ call: Call) throws -> HTTPResponse {
        guard case .staff(.admin, _) = call.caller else { throw APIError.forbidden("this needs an admin key") }
        let query = try Self.queryItems(call.request.query, allowed: ["q"])
        let text = (query["q"] ?? "").trimmingCharacters(in: .whitespaces)
        guard (1...200).contains(text.utf8.count) else {
            throw APIError.validationFailed([
                FieldIssue(field: "q", problem: "must be an order id or number, 1 to 200 bytes")
            ])
        }
        let orders = try store.orderIDs(matching: text, limit: Self.searchLimit).compactMap { id in
            try store.order(id: id, includingItems: false)
        }
        return json(200, .object(["orders": .array(try orders.map { .object(try timelineMembers($0)) })]))
    }

    /// `GET /v1/orders/{id}/timeline`: what happened to one order, oldest first: its status
    /// changes and every push attempt with its outcome and the public state it carried.
    func showTimeline(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        try requireSupportStaff(call, orderID: orderID)
        let order = try visibleOrder(orderID, call)
        return json(200, .object(try timelineMembers(order)))
    }

    /// Samples the figures the dashboard draws; the executable calls it every `historyStep`.
    public func recordHistorySample(now: Date = Date()) {
        history.record(DashboardHistory.sample(registry.snapshot()), at: now)
    }

    private func timelineMembers(_ order: Order) throws -> [String: JSONValue] {
        let events = try store.events(orderID: order.id).map { event -> (Date, JSONValue) in
            (
                event.at,
                .object([
                    "type": "status", "at": .time(event.at), "kind": .string(event.kind.rawValue),
                    "from": .string(event.from.rawValue), "to": .string(event.to.rawValue),
                    "actor": .string(event.actor), "reason": .optional(event.reason),
                ])
            )
        }
        let pushes = try store.pushLog(orderID: order.id).map { attempt -> (Date, JSONValue) in
            guard case .object(var members) = Views.push(attempt) else { return (attempt.attemptedAt, .null) }
            members["type"] = "push"
            members["at"] = .time(attempt.attemptedAt)
            members["accepted"] = .bool(attempt.httpStatus == 200)
            // Written by our own encoder from the public projection: embedded as it was sent.
            members["contentState"] = attempt.contentState.map { .fragment(Array($0.utf8)) } ?? .null
            return (attempt.attemptedAt, .object(members))
        }
        // A change and the pushes it caused share a millisecond at most: the change comes first.
        let timeline = (events.map { ($0.0, 0, $0.1) } + pushes.map { ($0.0, 1, $0.1) })
            .enumerated()
            .sorted { ($0.element.0, $0.element.1, $0.offset) < ($1.element.0, $1.element.1, $1.offset) }
            .map(\.element.2)
        return [
            "order": .object([
                "id": .string(order.id), "number": .string(order.number), "merchantId": .string(order.merchantID),
                "merchantName": .string(order.merchantName), "status": .string(order.status.rawValue),
                "createdAt": .time(order.createdAt), "updatedAt": .time(order.updatedAt),
                "estimatedArrival": .time(order.estimatedArrival),
            ]),
            "timeline": .array(timeline),
        ]
    }

    /// The query string's `name=value` pairs, percent-decoded (`+` is a space); a name outside
    /// `allowed`, a repeated name or an undecodable value is a `422` naming it.
    static func queryItems(_ query: String?, allowed: Set<String>) throws(APIError) -> [String: String] {
        var items: [String: String] = [:]
        var issues: [FieldIssue] = []
        for pair in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            let value = parts.count > 1 ? parts[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding : ""
            guard allowed.contains(name) else {
                issues.append(
                    FieldIssue(field: "query", problem: "takes only " + allowed.sorted().joined(separator: ", ")))
                continue
            }
            guard let value else {
                issues.append(FieldIssue(field: name, problem: "is not valid percent-encoded UTF-8"))
                continue
            }
            guard items[name] == nil else {
                issues.append(FieldIssue(field: name, problem: "must be given once"))
                continue
            }
            items[name] = value
        }
        if !issues.isEmpty { throw .validationFailed(issues) }
        return items
    }
}
