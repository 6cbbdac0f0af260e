import FoundationEssentials
import HTTPServer
import OrderDomain
import Storage
import Telemetry

extension DeliveryService {
    /// How many open orders one position of a rider moves at most (`POST /v1/riders/{riderId}/position`).
    static let ordersPerRiderPosition = 20

    /// `POST /v1/orders/{id}/position`: the assigned rider says where it is. Answered `202` at once:
    /// the position is kept in memory and stored with its ride when the ride is due (`RideTracker`).
    func postOrderPosition(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        let principal = try staffPrincipal(call, orderID: orderID)
        guard let order = try store.order(id: orderID, includingItems: false) else {
            throw APIError.notFound("order not found")
        }
        try order.checkPositionAllowed(for: principal)
        let position = try readPosition(call)
        try order.checkOpenForPositions()
        var answer = positionOutcome(rides.record(position, for: order, now: call.now))
        answer["orderId"] = .string(order.id)
        return json(202, .object(answer))
    }

    /// `POST /v1/riders/{riderId}/position`: one position for every open order of the rider (a rider
    /// carrying three orders posts once, not three times).
    func postRiderPosition(_ call: Call) throws -> HTTPResponse {
        guard case .rider(let riderID) = try staffPrincipal(call, orderID: nil) else {
            throw APIError.forbidden("only riders post positions")
        }
        guard riderID == call.parameter("riderId") else {
            throw APIError.forbidden("a rider key posts only its own rider's positions")
        }
        let position = try readPosition(call)
        let orders = try store.openOrders(riderID: riderID, limit: Self.ordersPerRiderPosition)
        let outcomes = orders.map { order -> JSONValue in
            var answer = positionOutcome(rides.record(position, for: order, now: call.now))
            answer["orderId"] = .string(order.id)
            return .object(answer)
        }
        return json(202, .object(["riderId": .string(riderID), "orders": .array(outcomes)]))
    }

    /// Stores the rides that are due and wakes the pusher for the pushes they queued. The process runs
    /// it a few times a second, and with `all` when it stops; tests call it when they choose.
    public func storeDueRides(all: Bool = false) {
        let now = clock()
        let outcome = rides.storeDue(now: now, all: all) { updates in
            let queued = try store.recordRides(updates, now: now)
            metrics.ridesStored.increment(by: Double(updates.count))
            metrics.ridePushesQueued.increment(by: Double(queued))
            wakePusher(queued)
        }
        switch outcome {
        case .nothingDue, .stored(_, recovered: false): break
        case .stored(_, recovered: true): logger.info("ride.store_recovered")
        case .failed(let error, let first):
            // Said once per run of failures (a full disk fails every tick); the rides start again from storage.
            if first { logger.error("ride.store_failed", ["error": .string("\(error)")]) }
        }
    }

    private func readPosition(_ call: Call) throws -> RiderPosition {
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let latitude = reader.number(body, "latitude")
        let longitude = reader.number(body, "longitude")
        let accuracy = reader.number(body, "accuracy")
        let recordedAt = reader.time(body, "recordedAt")
        let position: RiderPosition
        do {
            position = try RiderPosition.validated(
                latitude: latitude, longitude: longitude, accuracy: accuracy, recordedAt: recordedAt, now: call.now)
        } catch {
            // A field of the wrong type reached the domain as missing: report it once, as the reader saw it.
            let typed = Set(reader.issues.map(\.field))
            try reader.finish(adding: error.fieldIssues.filter { !typed.contains($0.field) })
            throw APIError(error)
        }
        try reader.finish()
        return position
    }

    private func positionOutcome(_ ignored: RideTracker.Ignored?) -> [String: JSONValue] {
        metrics.positions.increment([ignored?.rawValue ?? "accepted"])
        guard let ignored else { return ["position": "accepted"] }
        return ["position": "ignored", "reason": .string(ignored.rawValue)]
    }
}
