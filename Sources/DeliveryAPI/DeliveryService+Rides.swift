import FoundationEssentials
import HTTPServer
import OrderDomain
import Storage
import Telemetry

extension DeliveryService {
    /// How many open orders one position of a rider moves at most (`POST /v1/riders/{riderId}/position`).
    static let ordersPerRiderPosition = 20
    /// How many positions one request may carry (`positions`): what a rider app gathered since its last post.
    static let positionsPerRequest = 20
    /// How many rides one write stores at most. When riders start moving, every order's first
    /// position is due at once (3,000 in `bench/rides.sh`): stored in one write they held the writer,
    /// and every status change behind it, for tens of milliseconds four times a second.
    public static let ridesPerWrite = 32

    /// `POST /v1/orders/{id}/position`: the assigned rider says where it is. Answered `202` at once:
    /// the position is kept in memory and stored with its ride when the ride is due (`RideTracker`).
    func postOrderPosition(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        let principal = try staffPrincipal(call, orderID: orderID)
        guard let order = try store.order(id: orderID, includingItems: false) else {
            throw APIError.notFound("order not found")
        }
        try order.checkPositionAllowed(for: principal)
        let positions = try readPositions(call)
        try order.checkOpen()
        return json(202, outcome(of: positions, for: order, now: call.now))
    }

    /// `POST /v1/riders/{riderId}/position`: one position for every open order of the rider (a rider
    /// carrying three orders posts once, not three times). Only the orders of the rider's own merchant:
    /// another merchant naming a rider of the same id names another rider.
    func postRiderPosition(_ call: Call) throws -> HTTPResponse {
        let answer = try answerRiderPosition(call) { merchantID, riderID throws(StorageError) in
            try riderOrders.orders(merchantID: merchantID, riderID: riderID, now: call.now) { () throws(StorageError) in
                try store.openOrders(merchantID: merchantID, riderID: riderID, limit: Self.ordersPerRiderPosition)
            }
        }
        guard let answer else { throw APIError.internalError() }
        return answer
    }

    /// `postRiderPosition` on the event loop while the rider's orders are kept in memory (a rider
    /// posting every few seconds finds them there): no hand-over to a handler thread and back.
    /// `nil` when they must be read, and the pooled handler answers.
    func postRiderPositionFromMemory(_ call: Call) throws -> HTTPResponse? {
        try answerRiderPosition(call) { merchantID, riderID in
            riderOrders.cachedOrders(merchantID: merchantID, riderID: riderID, now: call.now)
        }
    }

    /// The rider's positions fed to the rider's open orders, as `orders` finds them (`nil`: not
    /// without a read, and nothing was fed).
    private func answerRiderPosition(
        _ call: Call, orders: (_ merchantID: String, _ riderID: String) throws(StorageError) -> [Order]?
    ) throws -> HTTPResponse? {
        guard case .rider(let riderID, let merchantID) = try staffPrincipal(call, orderID: nil) else {
            throw APIError.forbidden("only riders post positions")
        }
        guard riderID == call.parameter("riderId") else {
            throw APIError.forbidden("a rider key posts only its own rider's positions")
        }
        let positions = try readPositions(call)
        guard let orders = try orders(merchantID, riderID) else { return nil }
        let outcomes = orders.map { outcome(of: positions, for: $0, now: call.now) }
        return json(202, .object(["riderId": .string(riderID), "orders": .array(outcomes)]))
    }

    /// Stores the rides that are due and wakes the pusher for the pushes they queued, and lets go of
    /// riders' orders kept past their second. The process runs it a few times a second, and with
    /// `all` when it stops; tests call it when they choose.
    public func storeDueRides(all: Bool = false) {
        let now = clock()
        riderOrders.dropExpired(now: now)
        let outcome = rides.storeDue(now: now, all: all) { updates in
            // In slices, each its own write: the status changes queued meanwhile join the group
            // commits between them instead of waiting for every due ride at once.
            for start in stride(from: 0, to: updates.count, by: Self.ridesPerWrite) {
                let slice = Array(updates[start..<min(start + Self.ridesPerWrite, updates.count)])
                let queued = try store.recordRides(slice, now: now)
                metrics.ridesStored.increment(by: Double(slice.count))
                metrics.ridePushesQueued.increment(by: Double(queued))
                wakePusher(queued)
            }
        }
        switch outcome {
        case .nothingDue, .stored(_, recovered: false): break
        case .stored(_, recovered: true): logger.info("ride.store_recovered")
        case .failed(let error, let first):
            // Said once per run of failures (a full disk fails every tick); the rides start again from storage.
            if first { logger.error("ride.store_failed", ["error": .string("\(error)")]) }
        }
    }

    /// One position (the body is the position) or several (`{"positions": [...]}`, 1 to
    /// `positionsPerRequest`), oldest first.
    private func readPositions(_ call: Call) throws -> [RiderPosition] {
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        var objects: [(path: String, object: [String: JSONValue])] = []
        if body["positions"] != nil {
            let list = reader.array(body, "positions") ?? []
            if !(1...Self.positionsPerRequest).contains(list.count), reader.issues.isEmpty {
                reader.fail("positions", "must hold 1 to \(Self.positionsPerRequest) positions")
            }
            for (index, value) in list.prefix(Self.positionsPerRequest).enumerated() {
                guard case .object(let object) = value else {
                    reader.fail("positions[\(index)]", "must be an object")
                    continue
                }
                objects.append(("positions[\(index)].", object))
            }
        } else {
            objects = [("", body)]
        }
        var positions: [RiderPosition] = []
        var domainIssues: [FieldIssue] = []
        for (path, object) in objects {
            let latitude = reader.number(object, "latitude", path: path + "latitude")
            let longitude = reader.number(object, "longitude", path: path + "longitude")
            let accuracy = reader.number(object, "accuracy", path: path + "accuracy")
            let recordedAt = reader.time(object, "recordedAt", path: path + "recordedAt")
            do {
                positions.append(
                    try RiderPosition.validated(
                        latitude: latitude, longitude: longitude, accuracy: accuracy, recordedAt: recordedAt,
                        now: call.now))
            } catch {
                domainIssues += error.fieldIssues.map { FieldIssue(field: path + $0.field, problem: $0.problem) }
            }
        }
        // A field of the wrong type reached the domain as missing: report it once, as the reader saw it.
        let typed = Set(reader.issues.map(\.field))
        try reader.finish(adding: domainIssues.filter { !typed.contains($0.field) })
        return positions.sorted { $0.recordedAt < $1.recordedAt }
    }

    /// Feeds the positions to the order's ride: `accepted` when one of them moved it, else `ignored`
    /// with the reason of the last one.
    private func outcome(of positions: [RiderPosition], for order: Order, now: Date) -> JSONValue {
        var accepted = 0
        var lastIgnored: RideTracker.Ignored?
        for position in positions {
            if let ignored = rides.record(position, for: order, now: now) {
                lastIgnored = ignored
            } else {
                accepted += 1
            }
        }
        var answer: [String: JSONValue] = ["orderId": .string(order.id), "accepted": .number(Double(accepted))]
        if accepted == 0, let lastIgnored {
            answer["position"] = "ignored"
            answer["reason"] = .string(lastIgnored.rawValue)
        } else {
            answer["position"] = "accepted"
        }
        return .object(answer)
    }
}
