public import DeliveryActivityContract
public import FoundationEssentials

/// A request to move an order to another status, as a merchant, rider or admin sends it.
public struct StatusChange: Sendable, Hashable {
    public var status: OrderStatus
    public var estimatedArrival: Date?
    public var reason: String?

    public init(status: OrderStatus, estimatedArrival: Date? = nil, reason: String? = nil) {
        self.status = status
        self.estimatedArrival = estimatedArrival
        self.reason = reason
    }
}

extension Order {
    /// Applies a status change, or says why it cannot be.
    ///
    /// The rules, checked in this order: the caller must see the order (`not_found`), its role must
    /// allow the status (`forbidden`), the fields must be well-formed (`validation_failed`, whatever the
    /// state); the current status again is `unchanged` (terminal ones too, so
    /// a retried `delivered` is harmless); a terminal order takes nothing else (`order_closed`); an
    /// earlier status is `illegal_transition`; any later status is applied, steps may be skipped.
    ///
    /// - Throws: `not_found`, `forbidden`, `order_closed`, `illegal_transition`, `validation_failed`.
    public func applying(_ change: StatusChange, by principal: Principal, at now: Date) throws(OrderError)
        -> ChangeOutcome
    {
        guard isVisible(to: principal) else { throw OrderError(.notFound, "order not found") }
        guard principal.settableStatuses.contains(change.status) else {
            throw OrderError(.forbidden, "a \(principal.roleName) may not set status \(change.status.rawValue)")
        }
        // Malformed fields are refused whatever the order's state, so a retry cannot pass what the first try would not.
        var check = FieldChecker()
        let eta = change.estimatedArrival.flatMap {
            check.estimatedArrival($0, "estimatedArrival", createdAt: createdAt, now: now)
        }
        let reason = check.optionalText(change.reason, "reason", length: OrderLimits.reasonLength)
        try check.finish()

        if change.status == status { return .unchanged(self) }
        guard !status.isFinal else {
            throw OrderError(.orderClosed, "order is \(status.rawValue)", currentStatus: status)
        }
        if let target = change.status.pathStage, let current = status.pathStage, target < current {
            throw OrderError(
                .illegalTransition, "cannot go from \(status.rawValue) back to \(change.status.rawValue)",
                currentStatus: status
            )
        }

        var next = self
        next.status = change.status
        next.cancelledAt = change.status == .cancelled ? status : nil
        if let eta { next.estimatedArrival = eta }
        next.updatedAt = now
        let event = OrderEvent(
            orderID: id, kind: .statusChanged, from: status, to: change.status, actor: principal.auditLabel, at: now,
            reason: reason.flatMap { $0.isEmpty ? nil : $0 }
        )
        return .applied(next, event)
    }

    /// Moves the ETA; the same ETA again is `unchanged`.
    ///
    /// Merchants, the assigned rider and admins may move it while the order is open.
    /// - Throws: `not_found`, `order_closed`, `validation_failed`.
    public func changingEstimatedArrival(to eta: Date, by principal: Principal, at now: Date) throws(OrderError)
        -> ChangeOutcome
    {
        guard isVisible(to: principal) else { throw OrderError(.notFound, "order not found") }
        guard !status.isFinal else {
            throw OrderError(.orderClosed, "order is \(status.rawValue)", currentStatus: status)
        }
        var check = FieldChecker()
        let eta = check.estimatedArrival(eta, "estimatedArrival", createdAt: createdAt, now: now)
        try check.finish()
        guard let eta, eta != estimatedArrival else { return .unchanged(self) }

        var next = self
        next.estimatedArrival = eta
        next.updatedAt = now
        let event = OrderEvent(
            orderID: id, kind: .estimatedArrivalChanged, from: status, to: status, actor: principal.auditLabel,
            at: now, reason: nil
        )
        return .applied(next, event)
    }

    /// Assigns (or reassigns) the rider; the same rider again is `unchanged`.
    ///
    /// Only the order's merchant and admins assign riders, and only while the order is open.
    /// - Throws: `not_found`, `forbidden`, `order_closed`, `validation_failed`.
    public func assigning(_ rider: Rider, by principal: Principal, at now: Date) throws(OrderError) -> ChangeOutcome {
        guard isVisible(to: principal) else { throw OrderError(.notFound, "order not found") }
        if case .rider = principal { throw OrderError(.forbidden, "a rider may not assign riders") }
        guard !status.isFinal else {
            throw OrderError(.orderClosed, "order is \(status.rawValue)", currentStatus: status)
        }
        var check = FieldChecker()
        let id = check.identifier(rider.id, "riderId")
        let name = check.text(rider.name, "name", length: OrderLimits.nameLength)
        let phone = check.phone(rider.phone, "phone", required: false)
        try check.finish()
        guard let id, let name else { preconditionFailure("a rider passed validation without id or name") }
        let assigned = Rider(id: id, name: name, phone: phone)
        guard assigned != self.rider else { return .unchanged(self) }

        var next = self
        next.rider = assigned
        next.updatedAt = now
        let event = OrderEvent(
            orderID: self.id, kind: .riderAssigned, from: status, to: status, actor: principal.auditLabel, at: now,
            reason: nil
        )
        return .applied(next, event)
    }
}

extension Principal {
    /// The role's name in messages.
    public var roleName: String {
        switch self {
        case .merchant: "merchant"
        case .rider: "rider"
        case .admin: "admin"
        }
    }
}

extension Order {
    /// Whether a principal may post the rider's position for this order.
    ///
    /// Only the assigned rider knows where the rider is; the merchant and admins see the ride through
    /// the order. Checked before the position's fields; a closed order is checked after them.
    /// - Throws: `not_found` (not the assigned rider, nor anyone who may see the order), `forbidden`.
    public func checkPositionAllowed(for principal: Principal) throws(OrderError) {
        guard isVisible(to: principal) else { throw OrderError(.notFound, "order not found") }
        guard case .rider = principal else {
            throw OrderError(.forbidden, "only the order's rider posts positions")
        }
    }

    /// - Throws: `order_closed` once the order is delivered or cancelled: the ride is over, and a new
    ///   Live Activity would have nothing to show.
    public func checkOpen() throws(OrderError) {
        guard !status.isFinal else {
            throw OrderError(.orderClosed, "order is \(status.rawValue)", currentStatus: status)
        }
    }
}
