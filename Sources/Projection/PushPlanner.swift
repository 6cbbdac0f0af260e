public import DeliveryActivityContract
public import FoundationEssentials
public import OrderDomain

/// What the device should do with a Live Activity push (`aps.event`).
public enum LiveActivityEvent: String, Sendable, Hashable {
    case start
    case update
    case end
}

/// The APNs request headers a push needs, besides `authorization` and the path.
public struct APNsHeaders: Sendable, Hashable {
    /// Always `liveactivity` for these pushes.
    public let pushType: String
    /// `<bundle id>.push-type.liveactivity`.
    public let topic: String
    /// 10 to send at once, 5 to let the device choose; only 10 counts against the hourly budget.
    public let priority: Int
    /// After this time APNs stops trying: the push would show something no longer true.
    public let expiration: Date
    /// Set on start pushes so that two racing starts of one order collapse into one.
    public let collapseID: String?
}

/// One push, ready for the APNs client.
public struct LiveActivityPush: Sendable, Hashable {
    public let event: LiveActivityEvent
    public let headers: APNsHeaders
    /// The whole request body, at most `PushPlanner.payloadLimit` bytes.
    public let payload: [UInt8]
    public let contentState: ContentState
    /// The order's status that `contentState` shows, typed (the state carries the app's string).
    public let orderStatus: OrderStatus
    /// `LiveActivityProjector.fingerprint` of `contentState`, for de-duplication.
    public let fingerprint: String
    /// `aps.timestamp`, whole Unix seconds.
    public let timestamp: Date
    /// Whether an alert is shown with it.
    public let hasAlert: Bool
}

/// Why no push is sent.
public enum SkipReason: String, Sendable, Hashable {
    /// The projected state equals the one last sent to this activity.
    case unchangedState = "unchanged_state"
    /// iOS stops accepting updates 8 hours after the activity started.
    case activityExpired = "activity_expired"
    /// A push-to-start for an order that has already ended.
    case orderAlreadyEnded = "order_already_ended"
}

/// The planner's answer.
public enum PushDecision: Sendable, Hashable {
    case send(LiveActivityPush)
    case skip(SkipReason)
}

/// What the pusher knows about one activity when it plans its next push.
public struct ActivityContext: Sendable, Hashable {
    /// The app's bundle id; the topic is derived from it.
    public var bundleID: String
    /// When the activity started (registered), for the 8-hour lifetime.
    public var startedAt: Date
    /// What the activity shows: the last push accepted, or what the app reported; `nil` if neither.
    public var shown: ShownState?
    /// Priority-10 pushes sent to this activity during the last hour.
    public var highPriorityPushesInLastHour: Int

    public init(bundleID: String, startedAt: Date, shown: ShownState? = nil, highPriorityPushesInLastHour: Int = 0) {
        self.bundleID = bundleID
        self.startedAt = startedAt
        self.shown = shown
        self.highPriorityPushesInLastHour = highPriorityPushesInLastHour
    }
}

/// A payload that would exceed what APNs accepts, naming the field that takes the most room.
public struct PayloadTooLargeError: Error, Sendable, Hashable, CustomStringConvertible {
    public let size: Int
    public let limit: Int
    /// The order field whose text takes the most room (`merchantName`, `number`, `rider.name`).
    public let largestField: String

    public var description: String {
        "payload of \(size) bytes exceeds the APNs limit of \(limit) bytes; largest field: \(largestField)"
    }
}

/// Decides whether, and how, to push an order's state to one Live Activity, and builds the payload.
///
/// The decision depends on the order's latest state and what the activity was last sent, not on the
/// event that triggered it, so that coalesced updates still carry the right event, priority and alert:
/// - a terminal order ends the activity (`end`, priority 10, alert, `dismissal-date`);
/// - a status not yet sent is an `update` at priority 10 for `pickup` and `delivering` (5 otherwise),
///   with an alert on `delivering`;
/// - anything else (ETA, rider) is an `update` at priority 5 without alert, skipped when the state
///   equals the last one sent;
/// - priority-10 updates past the hourly budget are sent at priority 5;
/// - nothing is sent to an activity past its 8-hour lifetime; `stale-date` never points beyond it;
/// - `stale-date` and `apns-expiration` are never sooner than `minimumFreshness` from now (late orders).
public struct PushPlanner: Sendable {
    /// APNs refuses larger bodies with `PayloadTooLarge`.
    public static let payloadLimit = 4096
    /// The `ActivityAttributes` type the iOS app declares, named in start pushes.
    public static let attributesType = "DeliveryAttributes"

    public let projector: LiveActivityProjector
    public var configuration: ProjectionConfiguration { projector.configuration }

    public init(configuration: ProjectionConfiguration = ProjectionConfiguration()) {
        self.projector = LiveActivityProjector(configuration: configuration)
    }

    /// Plans the push that starts an activity on a device with a push-to-start token.
    /// - Throws: `PayloadTooLargeError` if the payload cannot fit.
    public func planStart(order: Order, bundleID: String, now: Date) throws(PayloadTooLargeError) -> PushDecision {
        guard !order.status.isFinal else { return .skip(.orderAlreadyEnded) }
        let state = projector.contentState(for: order)
        let staleDate = staleDate(for: state, startedAt: now, now: now)
        let headers = APNsHeaders(
            pushType: "liveactivity", topic: Self.topic(for: bundleID), priority: 10, expiration: staleDate,
            collapseID: "start-" + LiveActivityProjector.fingerprint(of: Array(order.id.utf8))
        )
        return .send(
            try build(
                event: .start, order: order, state: state, headers: headers, alert: true, staleDate: staleDate,
                dismissalDate: nil, timestamp: Self.timestamp(now: now, after: nil)
            )
        )
    }

    /// Plans the next push to a running activity for the order's current state.
    /// - Throws: `PayloadTooLargeError` if the payload cannot fit.
    public func planUpdate(order: Order, activity: ActivityContext, now: Date) throws(PayloadTooLargeError)
        -> PushDecision
    {
        guard now < activity.startedAt.addingTimeInterval(configuration.activityLifetime) else {
            return .skip(.activityExpired)
        }
        let state = projector.contentState(for: order)
        let topic = Self.topic(for: activity.bundleID)

        if order.status.isFinal {
            let dismissal = now.addingTimeInterval(configuration.dismissalDelay)
            // Kept by APNs past the dismissal too: a phone offline now must still learn that the order ended.
            let expiration = max(dismissal, now.addingTimeInterval(configuration.minimumFreshness))
            let headers = APNsHeaders(
                pushType: "liveactivity", topic: topic, priority: 10, expiration: expiration, collapseID: nil
            )
            return .send(
                try build(
                    event: .end, order: order, state: state, headers: headers, alert: true, staleDate: nil,
                    dismissalDate: dismissal, timestamp: Self.timestamp(now: now, after: activity.shown?.timestamp)
                )
            )
        }

        let statusIsNew = activity.shown?.status != order.status
        if !statusIsNew, activity.shown?.fingerprint == projector.fingerprint(state) {
            return .skip(.unchangedState)
        }
        var priority = Self.mayUseHighPriority(order: order, shown: activity.shown) ? 10 : 5
        if priority == 10 && activity.highPriorityPushesInLastHour >= configuration.highPriorityBudgetPerHour {
            priority = 5
        }
        let staleDate = staleDate(for: state, startedAt: activity.startedAt, now: now)
        let headers = APNsHeaders(
            pushType: "liveactivity", topic: topic, priority: priority, expiration: staleDate, collapseID: nil
        )
        return .send(
            try build(
                event: .update, order: order, state: state, headers: headers,
                alert: statusIsNew && order.status == .delivering, staleDate: staleDate, dismissalDate: nil,
                timestamp: Self.timestamp(now: now, after: activity.shown?.timestamp)
            )
        )
    }

    /// Whether an update of the order to an activity showing `shown` goes at priority 10, budget
    /// allowing: the status is new and is one the customer acts on (the rider is at the
    /// restaurant, or on the way). Only these need the activity's count of priority-10 pushes.
    public static func mayUseHighPriority(order: Order, shown: ShownState?) -> Bool {
        shown?.status != order.status && (order.status == .pickup || order.status == .delivering)
    }

    /// `<bundle id>.push-type.liveactivity`, the topic APNs requires for Live Activity pushes.
    public static func topic(for bundleID: String) -> String {
        bundleID + ".push-type.liveactivity"
    }

    /// When the activity turns stale (and APNs stops trying): the ETA plus the grace, but never sooner
    /// than `minimumFreshness` from now, so that a late order is not greyed out while it moves, and never
    /// beyond the activity's lifetime, after which iOS accepts no update anyway.
    func staleDate(for state: ContentState, startedAt: Date, now: Date) -> Date {
        min(
            max(
                state.estimatedArrival.addingTimeInterval(configuration.staleGrace),
                now.addingTimeInterval(configuration.minimumFreshness)),
            startedAt.addingTimeInterval(configuration.activityLifetime)
        )
    }

    /// `aps.timestamp`: the sending second, but always after the activity's last accepted push, so
    /// that two pushes in one second, or a clock stepped back, never make iOS drop the newer state
    /// as older than what it shows.
    static func timestamp(now: Date, after last: Date?) -> Date {
        let second = now.timeIntervalSince1970.rounded(.down)
        guard let last else { return Date(timeIntervalSince1970: second) }
        return Date(timeIntervalSince1970: max(second, last.timeIntervalSince1970.rounded(.down) + 1))
    }

    /// Higher for orders closer to the door, so the most urgent one owns the Dynamic Island.
    static func relevanceScore(_ status: OrderStatus) -> Int64 {
        switch status {
        case .delivering: 100
        case .pickup: 80
        case .preparing: 60
        case .placed: 40
        case .delivered, .cancelled: 10
        }
    }

    // swift-format-ignore: FunctionParameterCount
    private func build(
        event: LiveActivityEvent,
        order: Order,
        state: ContentState,
        headers: APNsHeaders,
        alert: Bool,
        staleDate: Date?,
        dismissalDate: Date?,
        timestamp: Date
    ) throws(PayloadTooLargeError) -> LiveActivityPush {
        let attributes =
            event == .start || alert
            ? projector.attributes(for: order) : DeliveryAttributes(orderId: "", orderNumber: "", merchantName: "")
        let alertText =
            alert
            ? Language(localeTag: order.customer.locale).alert(
                for: order.status, merchantName: attributes.merchantName, riderName: state.riderName
            ) : nil
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.key("aps")
        writer.beginObject()
        if let alertText {
            writer.key("alert")
            writer.beginObject()
            writer.member("body", alertText.body)
            writer.member("sound", "default")
            writer.member("title", alertText.title)
            writer.endObject()
        }
        if event == .start {
            writer.key("attributes")
            projector.write(attributes, into: &writer)
            writer.member("attributes-type", Self.attributesType)
        }
        writer.key("content-state")
        let stateStart = writer.bytes.count
        projector.write(state, into: &writer)
        let fingerprint = LiveActivityProjector.fingerprint(of: writer.bytes[stateStart...])
        if let dismissalDate {
            writer.member("dismissal-date", Int64(dismissalDate.timeIntervalSince1970.rounded(.down)))
        }
        writer.member("event", event.rawValue)
        if event == .start {
            writer.member("input-push-token", Int64(1))
        }
        writer.member("relevance-score", Self.relevanceScore(order.status))
        if let staleDate {
            writer.member("stale-date", Int64(staleDate.timeIntervalSince1970.rounded(.down)))
        }
        writer.member("timestamp", Int64(timestamp.timeIntervalSince1970))
        writer.endObject()
        writer.endObject()

        let payload = writer.bytes
        guard payload.count <= Self.payloadLimit else {
            let merchantName = attributes.merchantName.utf8.count
            let riderName = state.riderName?.utf8.count ?? 0
            let alertBody = alertText?.body ?? ""
            let fields: [(String, Int)] = [
                (
                    "merchantName",
                    (event == .start ? merchantName : 0)
                        + (alertBody.contains(attributes.merchantName) ? merchantName : 0)
                ),
                ("number", event == .start ? attributes.orderNumber.utf8.count : 0),
                ("rider.name", riderName + (state.riderName.map { alertBody.contains($0) } == true ? riderName : 0)),
            ]
            let largest = fields.max { $0.1 < $1.1 }?.0 ?? "aps"
            throw PayloadTooLargeError(size: payload.count, limit: Self.payloadLimit, largestField: largest)
        }
        return LiveActivityPush(
            event: event, headers: headers, payload: payload, contentState: state, orderStatus: order.status,
            fingerprint: fingerprint, timestamp: timestamp, hasAlert: alertText != nil
        )
    }
}
