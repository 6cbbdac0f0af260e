import DeliveryActivityContract
import OrderDomain
import Projection
import Storage

/// The JSON shapes of responses, in one place so that `docs/openapi.yaml` has one thing to match.
enum Views {
    /// Everything the server knows of an order: for its merchant, its rider and admins.
    static func staff(_ order: Order) -> JSONValue {
        var members: [String: JSONValue] = [
            "id": .string(order.id),
            "merchantId": .string(order.merchantID),
            "number": .string(order.number),
            "merchantName": .string(order.merchantName),
            "items": .array(
                order.items.map {
                    .object([
                        "name": .string($0.name), "quantity": .number(Double($0.quantity)), "price": .number($0.price),
                    ])
                }),
            "customer": .object([
                "id": .string(order.customer.id), "name": .string(order.customer.name),
                "phone": .string(order.customer.phone), "locale": .string(order.customer.locale),
            ]),
            "address": .string(order.address),
            "payment": .object([
                "method": .string(order.payment.method), "brand": .optional(order.payment.brand),
                "last4": .optional(order.payment.last4),
            ]),
            "note": .optional(order.note),
            "destination": order.destination.map(coordinate) ?? .null,
        ]
        members.merge(progress(order)) { own, _ in own }
        return .object(members)
    }

    /// The view of an order for a staff principal: everything for its merchant and admins, what the
    /// delivery needs for its rider.
    static func order(_ order: Order, for principal: Principal) -> JSONValue {
        switch principal {
        case .admin, .merchant: staff(order)
        case .rider: rider(order)
        }
    }

    /// What the assigned rider needs to deliver: the items to pick up, the customer's first name, and
    /// while the order is open their phone, address and note. Never payment, prices or the customer's
    /// id; once the order ended, no contact details either.
    static func rider(_ order: Order) -> JSONValue {
        let open = !order.status.isFinal
        let firstName = order.customer.name.split(separator: " ").first.map(String.init) ?? ""
        var customer: [String: JSONValue] = ["firstName": .string(firstName)]
        if open { customer["phone"] = .string(order.customer.phone) }
        var members: [String: JSONValue] = [
            "id": .string(order.id),
            "number": .string(order.number),
            "merchantName": .string(order.merchantName),
            "items": .array(
                order.items.map { .object(["name": .string($0.name), "quantity": .number(Double($0.quantity))]) }),
            "customer": .object(customer),
        ]
        members.merge(progress(order)) { own, _ in own }
        if open {
            members["address"] = .string(order.address)
            members["note"] = .optional(order.note)
            members["destination"] = order.destination.map(coordinate) ?? .null
        }
        return .object(members)
    }

    /// Where the order stands, the same in every staff view: status, stage, times and rider.
    private static func progress(_ order: Order) -> [String: JSONValue] {
        var members: [String: JSONValue] = [
            "status": .string(order.status.rawValue),
            "stage": .number(Double(order.stage)),
            "estimatedArrival": .time(order.estimatedArrival),
            "createdAt": .time(order.createdAt),
            "updatedAt": .time(order.updatedAt),
            "rider": order.rider.map {
                .object(["id": .string($0.id), "name": .string($0.name), "phone": .optional($0.phone)])
            } ?? .null,
        ]
        if let cancelledAt = order.cancelledAt { members["cancelledAt"] = .string(cancelledAt.rawValue) }
        members["ride"] = order.tracking.map(ride) ?? .null
        return members
    }

    static func coordinate(_ point: Coordinate) -> JSONValue {
        .object(["latitude": .number(point.latitude), "longitude": .number(point.longitude)])
    }

    /// What staff see of a ride: when the rider was last heard of and the ETA from its speed. The
    /// distance, rounded as the customer sees it, is in `GET /v1/orders/{id}/live-activity`; the
    /// rider's coordinates nowhere: the server does not keep them.
    private static func ride(_ tracking: DeliveryTracking) -> JSONValue {
        .object(["positionAt": .time(tracking.positionAt), "estimatedArrival": .time(tracking.estimatedArrival)])
    }

    /// What a customer may see: the Live Activity projection and nothing else.
    static func liveActivity(_ order: Order, projector: LiveActivityProjector) -> JSONValue {
        .object([
            "attributes": .fragment(projector.encode(projector.attributes(for: order))),
            "contentState": .fragment(projector.encode(projector.contentState(for: order))),
        ])
    }

    /// The customer's view of an order: its id and the projection.
    static func publicOrder(_ order: Order, projector: LiveActivityProjector) -> JSONValue {
        guard case .object(var members) = liveActivity(order, projector: projector) else { return .null }
        members["id"] = .string(order.id)
        return .object(members)
    }

    static func activity(_ record: ActivityRecord) -> JSONValue {
        var members: [String: JSONValue] = [
            "activityId": .string(record.activityID),
            "startedAt": .time(record.startedAt),
            "registeredAt": .time(record.registeredAt),
        ]
        members.merge(pushAddress(record.platform, record.environment, record.bundleID)) { $1 }
        return .object(members)
    }

    /// Where a device's pushes go: an iPhone's APNs environment and app, or an Android phone's
    /// Firebase project.
    static func pushAddress(_ platform: PushPlatform, _ environment: PushEnvironment, _ bundleID: String)
        -> [String: JSONValue]
    {
        switch platform {
        case .ios:
            ["platform": .string("ios"), "environment": .string(environment.rawValue), "bundleId": .string(bundleID)]
        case .android: ["platform": .string("android"), "firebaseProjectId": .string(bundleID)]
        }
    }

    static func push(_ attempt: PushAttempt) -> JSONValue {
        .object([
            "target": .string(attempt.targetID),
            "event": .string(attempt.event),
            "priority": .number(Double(attempt.priority)),
            "httpStatus": attempt.httpStatus.map { .number(Double($0)) } ?? .null,
            "reason": .optional(attempt.reason),
            "apnsId": .optional(attempt.platform == .ios ? attempt.apnsID : nil),
            "fcmMessageName": .optional(attempt.platform == .android ? attempt.apnsID : nil),
            "latencyMs": attempt.latencyMilliseconds.map { .number(Double($0)) } ?? .null,
            "attemptedAt": .time(attempt.attemptedAt),
            "requestId": .optional(attempt.requestID),
            "platform": .string(attempt.platform.rawValue),
        ])
    }

    static func apiKey(_ record: APIKeyRecord) -> JSONValue {
        .object([
            "id": .string(record.id),
            "role": .string(record.role.rawValue),
            "merchantId": .optional(record.merchantID),
            "riderId": .optional(record.riderID),
            "createdAt": .time(record.createdAt),
            "revokedAt": .time(record.revokedAt),
        ])
    }

    static func deadLetter(_ letter: DeadLetter) -> JSONValue {
        var members: [String: JSONValue] = [
            "id": .number(Double(letter.id)),
            "orderId": .string(letter.orderID),
            "attempts": .number(Double(letter.attempts)),
            "reason": .string(letter.reason),
            "diedAt": .time(letter.diedAt),
            "platform": .optional(letter.platform?.rawValue),
        ]
        switch letter.target {
        case .activity(let activityID):
            members["kind"] = "activity"
            members["activityId"] = .string(activityID)
        case .start(let customerID, let deviceID):
            members["kind"] = "start"
            members["customerId"] = .string(customerID)
            members["deviceId"] = .string(deviceID)
        }
        return .object(members)
    }
}
