import DeliveryActivityContract
import Foundation
import HTTPServer
import OrderDomain
import Projection
import Storage
import Telemetry

extension DeliveryService {
    /// `POST /v1/orders`: a merchant creates an order of its own; an admin names the merchant.
    func createOrder(_ call: Call) throws -> TransactionStep {
        let principal = try staffPrincipal(call, orderID: nil)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let merchantID: String
        switch principal {
        case .merchant(let id):
            if let named = reader.string(body, "merchantId"), named != id {
                throw APIError.forbidden("a merchant key creates orders only for its own merchant")
            }
            merchantID = id
        case .admin:
            merchantID = reader.require(reader.identifier(body, "merchantId"), "merchantId") ?? ""
        case .rider:
            throw APIError.forbidden("a rider may not create orders")
        }
        let draft = readDraft(body, &reader)

        let now = call.now
        let (order, event): (Order, OrderEvent)
        do {
            (order, event) = try draft.validated(
                id: "o_" + Credentials.newOrderIDSuffix(now: now), merchantID: merchantID, by: principal, at: now)
        } catch {
            // A field of the wrong type reached the domain as missing: report it once, as the reader saw it.
            let typed = Set(reader.issues.map(\.field))
            try reader.finish(adding: error.fieldIssues.filter { !typed.contains($0.field) })
            throw APIError(error)
        }
        try reader.finish()
        let tracking = Credentials.newTrackingToken()
        return { transaction in
            switch try transaction.createOrder(
                order, event: event, trackingTokenHash: tracking.hash, now: now,
                startsAt: self.configuration.projection.startTime(of: order, now: now),
                requestID: call.request.requestID)
            {
            case .created(let order, _, let queuedStarts):
                return Written {
                    self.json(201, .object(["order": Views.staff(order), "trackingToken": .string(tracking.token)]))
                } afterCommit: {
                    self.metrics.ordersCreated.increment()
                    self.wakePusher(queuedStarts)
                }
            case .existing(let order):
                return Written { self.json(200, .object(["order": Views.staff(order)])) }
            }
        }
    }

    /// `GET /v1/orders/{id}`: the staff view for staff, the public projection for its customer.
    func showOrder(_ call: Call) throws -> HTTPResponse {
        let order = try visibleOrder(call.parameter("id"), call)
        guard case .staff(let principal, _) = call.caller else {
            return json(200, .object(["order": Views.publicOrder(order, projector: projector)]))
        }
        return json(200, .object(["order": Views.order(order, for: principal)]))
    }

    /// `POST /v1/orders/{id}/status`: the state machine of design §2.
    func changeStatus(_ call: Call) throws -> TransactionStep {
        try applyChange(call) { reader, body in
            let statusText = reader.require(reader.string(body, "status"), "status")
            let status = statusText.flatMap(OrderStatus.init(rawValue:))
            if statusText != nil, status == nil {
                reader.fail("status", "must be one of " + OrderStatus.allCases.map(\.rawValue).joined(separator: ", "))
            }
            let eta = reader.time(body, "estimatedArrival")
            let reason = reader.string(body, "reason")
            return status.map { StatusChange(status: $0, estimatedArrival: eta, reason: reason) }
        } change: { order, change, principal, now throws(OrderError) in
            try order.applying(change, by: principal, at: now)
        }
    }

    /// `PATCH /v1/orders/{id}/eta`.
    func changeEstimatedArrival(_ call: Call) throws -> TransactionStep {
        try applyChange(call) { reader, body in
            reader.require(reader.time(body, "estimatedArrival"), "estimatedArrival")
        } change: { order, eta, principal, now throws(OrderError) in
            try order.changingEstimatedArrival(to: eta, by: principal, at: now)
        }
    }

    /// `PUT /v1/orders/{id}/rider`.
    func assignRider(_ call: Call) throws -> TransactionStep {
        try applyChange(call) { reader, body in
            Rider(
                id: reader.string(body, "riderId") ?? "", name: reader.string(body, "name") ?? "",
                phone: reader.string(body, "phone"))
        } change: { order, rider, principal, now throws(OrderError) in
            try order.assigning(rider, by: principal, at: now)
        }
    }

    /// `POST /v1/orders/{id}/tracking-token`: the merchant gives the customer a new tracking token
    /// (the old one leaked, or was lost); the old one stops working at once. Shown only in this answer.
    func reissueTrackingToken(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        if case .rider = try staffPrincipal(call, orderID: orderID) {
            _ = try visibleOrder(orderID, call)
            throw APIError.forbidden("a rider may not issue tracking tokens")
        }
        _ = try visibleOrder(orderID, call)
        let tracking = Credentials.newTrackingToken()
        guard try store.replaceTrackingToken(orderID: orderID, hash: tracking.hash) else {
            throw APIError.notFound("order not found")
        }
        return json(201, .object(["orderId": .string(orderID), "trackingToken": .string(tracking.token)]))
    }

    /// `GET /v1/orders/{id}/live-activity`: attributes and state exactly as the app decodes them.
    func showLiveActivity(_ call: Call) throws -> HTTPResponse {
        let order = try visibleOrder(call.parameter("id"), call)
        guard case .object(var view) = Views.liveActivity(order, projector: projector) else {
            throw APIError.internalError()
        }
        // When an app that starts the activity itself should: a pre-order's start waits (iOS would
        // end an activity started a day early long before delivery); an ended order has none.
        if !order.status.isFinal {
            view["startAt"] = .time(configuration.projection.startTime(of: order, now: call.now))
        }
        return json(200, .object(view))
    }

    /// `GET /v1/orders/{id}/pushes`: every APNs attempt for the order, oldest first.
    func showPushes(_ call: Call) throws -> HTTPResponse {
        let orderID = call.parameter("id")
        try requireSupportStaff(call, orderID: orderID)
        let order = try visibleOrder(orderID, call)
        let attempts = try store.pushLog(orderID: order.id)
        return json(200, .object(["orderId": .string(order.id), "pushes": .array(attempts.map(Views.push))]))
    }

    /// A staff member's change of the order in the path: the body as `read` reads it (every field
    /// issue answered at once, before anything is locked), then the domain's decision by `change` on
    /// the order as it is stored (locked, so that concurrent changes of one order serialize), its
    /// outcome written in the same transaction; answers `{order, transition}`.
    private func applyChange<Request: Sendable>(
        _ call: Call, read: (inout FieldReader, [String: JSONValue]) -> Request?,
        change: @escaping @Sendable (Order, Request, Principal, Date) throws(OrderError) -> ChangeOutcome
    ) throws -> TransactionStep {
        let orderID = call.parameter("id")
        let principal = try staffPrincipal(call, orderID: orderID)
        var reader = FieldReader()
        let request = read(&reader, try jsonObject(call.request))
        try reader.finish()
        guard let request else { throw APIError.internalError() }
        return { transaction in
            guard let current = try transaction.lockOrder(id: orderID) else {
                throw APIError.notFound("order not found")
            }
            let stored = try transaction.record(
                try change(current, request, principal, call.now), of: current, now: call.now,
                requestID: call.request.requestID)
            // A placed order's start waits for its lead time: preparing it, or moving its ETA, moves that.
            var startsNow: Int? = 0
            if case .applied(let order, let event) = stored.outcome, event.from == .placed {
                let start = self.configuration.projection.startTime(of: order, now: call.now)
                let moved = try transaction.scheduleStarts(orderID: order.id, at: start, now: call.now)
                startsNow = start <= call.now ? moved : 0
            }
            // Uncounted (PostgreSQL writes them without waiting): the pusher is woken anyway.
            let pushesQueued = stored.queuedPushes.flatMap { queued in startsNow.map { queued + $0 } } ?? 1
            return Written {
                let transition: JSONValue =
                    switch stored.outcome {
                    case .applied: "applied"
                    case .unchanged: "unchanged"
                    }
                return self.json(
                    200,
                    .object(["order": Views.order(stored.outcome.order, for: principal), "transition": transition]))
            } afterCommit: {
                if case .applied(let order, let event) = stored.outcome {
                    if event.from != event.to {
                        self.metrics.transitions.increment([event.from.rawValue, order.status.rawValue])
                    }
                    // What a position of the order's rider (or of the rider it had) reads changed.
                    for riderID in Set([current.rider?.id, order.rider?.id].compactMap { $0 }) {
                        self.riderOrders.forget(merchantID: order.merchantID, riderID: riderID)
                    }
                }
                self.wakePusher(pushesQueued)
            }
        }
    }

    /// `POST /v1/orders/{id}/live-activity/start`: the merchant starts the order's Live Activity now
    /// (a pre-order whose start would wait, or a customer who asked again): a `start` push to each of
    /// the customer's devices that has not had this order's start. Repeating it queues nothing new.
    func startLiveActivity(_ call: Call) throws -> TransactionStep {
        let orderID = call.parameter("id")
        let principal = try staffPrincipal(call, orderID: orderID)
        if case .rider = principal {
            _ = try visibleOrder(orderID, call)  // an order the rider does not carry stays unknown (404)
            throw APIError.forbidden("a rider may not start the customer's Live Activity")
        }
        return { transaction in
            guard let order = try transaction.lockOrder(id: orderID), order.isVisible(to: principal) else {
                throw APIError.notFound("order not found")
            }
            guard !order.status.isFinal else {
                throw APIError(
                    OrderError(
                        .orderClosed, "order is \(order.status.rawValue): nothing to start",
                        currentStatus: order.status))
            }
            let queued = try transaction.startNow(order, now: call.now, requestID: call.request.requestID)
            return Written {
                self.json(202, .object(["orderId": .string(order.id), "queuedStarts": .number(Double(queued))]))
            } afterCommit: {
                self.wakePusher(queued)
            }
        }
    }

    private func readDraft(_ body: [String: JSONValue], _ reader: inout FieldReader) -> OrderDraft {
        let items = reader.array(body, "items")?.enumerated().map { index, value -> OrderDraft.Item in
            guard case .object(let item) = value else {
                reader.fail("items[\(index)]", "must be an object")
                return OrderDraft.Item(name: nil, quantity: nil, price: nil)
            }
            return reader.within("items[\(index)]") { reader in
                OrderDraft.Item(
                    name: reader.string(item, "name"), quantity: reader.integer(item, "quantity"),
                    price: reader.number(item, "price"))
            }
        }
        let customer = reader.nested(body, "customer") { reader, customer in
            OrderDraft.CustomerDraft(
                id: reader.string(customer, "id"), name: reader.string(customer, "name"),
                phone: reader.string(customer, "phone"), locale: reader.string(customer, "locale"))
        }
        let payment = reader.nested(body, "payment") { reader, payment in
            OrderDraft.PaymentDraft(
                method: reader.string(payment, "method"), brand: reader.string(payment, "brand"),
                last4: reader.string(payment, "last4"))
        }
        let destination = reader.nested(body, "destination") { reader, point in
            OrderDraft.CoordinateDraft(
                latitude: reader.number(point, "latitude"), longitude: reader.number(point, "longitude"))
        }
        return OrderDraft(
            number: reader.string(body, "number"), merchantName: reader.string(body, "merchantName"), items: items,
            customer: customer, address: reader.string(body, "address"), payment: payment,
            estimatedArrival: reader.time(body, "estimatedArrival"), note: reader.string(body, "note"),
            destination: destination
        )
    }
}

extension DeliveryService {
    /// The staff principal of a call. A customer is refused: `403` on its own order (it knows the
    /// order exists), `404` on any other.
    func staffPrincipal(_ call: Call, orderID: String?) throws -> Principal {
        switch call.caller {
        case .staff(let principal, _): return principal
        case .customer(let ownOrder):
            if let orderID, orderID != ownOrder { throw APIError.notFound("order not found") }
            throw APIError.forbidden("a tracking token may only read its order and register its activities")
        case .customerAccount(let account):
            if let orderID, try store.order(id: orderID).map(account.owns) != true {
                throw APIError.notFound("order not found")
            }
            throw APIError.forbidden(
                "a customer credential may only read its customer's orders and register devices and activities")
        }
    }

    /// The merchant or an admin: who answers a customer about the order's pushes. A rider sees the
    /// order it delivers, not what was pushed to the customer's phone (`403`); others as
    /// `staffPrincipal` says.
    func requireSupportStaff(_ call: Call, orderID: String) throws {
        if case .rider = try staffPrincipal(call, orderID: orderID) {
            _ = try visibleOrder(orderID, call)  // an order the rider does not carry stays unknown (404)
            throw APIError.forbidden("the push log is for the merchant and admins")
        }
    }

    /// The order, if the caller may know it exists; `404` otherwise.
    func visibleOrder(_ orderID: String, _ call: Call) throws -> Order {
        guard let order = try store.order(id: orderID) else { throw APIError.notFound("order not found") }
        switch call.caller {
        case .staff(let principal, _):
            guard order.isVisible(to: principal) else { throw APIError.notFound("order not found") }
        case .customer(let ownOrder):
            guard ownOrder == order.id else { throw APIError.notFound("order not found") }
        case .customerAccount(let account):
            guard account.owns(order) else { throw APIError.notFound("order not found") }
        }
        return order
    }
}
