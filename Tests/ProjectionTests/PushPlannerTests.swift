import DeliveryActivityContract
import Foundation
import OrderDomain
import Projection
import Testing

@Suite("Push plan rules")
struct PushPlannerTests {
    let planner = PushPlanner()

    func push(_ decision: PushDecision) -> LiveActivityPush? {
        if case .send(let push) = decision { return push }
        return nil
    }

    /// Priority and alert per status: 10 for pickup and delivering, alert only on delivering, end at 10.
    @Test(arguments: [
        (OrderStatus.preparing, LiveActivityEvent.update, 10 - 5, false),
        (.pickup, .update, 10, false),
        (.delivering, .update, 10, true),
        (.delivered, .end, 10, true),
        (.cancelled, .end, 10, true),
    ])
    func priorityAndAlert(status: OrderStatus, event: LiveActivityEvent, priority: Int, alert: Bool) throws {
        let activity = ActivityContext(bundleID: "b", startedAt: Fixtures.placedAt, shown: Fixtures.shown(.placed))
        let sent = try #require(
            push(try planner.planUpdate(order: Fixtures.order(status: status), activity: activity, now: Fixtures.now)))
        #expect(sent.event == event)
        #expect(sent.headers.priority == priority)
        #expect(sent.hasAlert == alert)
    }

    /// `aps.timestamp` is the sending second, but always after the activity's last accepted push: a
    /// second push in the same second, and one after the clock stepped back five minutes, are later
    /// still; the end of the order too.
    @Test(arguments: [
        (nil as TimeInterval?, 0 as TimeInterval), (0, 1), (0.7, 1), (300, 301), (-60, 0),
    ])
    func timestampsOnlyIncrease(lastSentAfterNow: TimeInterval?, expectedAfterNow: TimeInterval) throws {
        let now = Fixtures.now.addingTimeInterval(0.4)
        for status in [OrderStatus.pickup, .delivered] {
            let activity = ActivityContext(
                bundleID: "b", startedAt: Fixtures.placedAt,
                shown: Fixtures.shown(
                    .preparing, pushedAt: lastSentAfterNow.map { Fixtures.now.addingTimeInterval($0) }))
            let sent = try #require(
                push(try planner.planUpdate(order: Fixtures.order(status: status), activity: activity, now: now)))
            #expect(sent.timestamp == Fixtures.now.addingTimeInterval(expectedAfterNow), "\(status)")
            let payload = String(decoding: sent.payload, as: UTF8.self)
            let seconds = Int64(Fixtures.now.addingTimeInterval(expectedAfterNow).timeIntervalSince1970)
            #expect(payload.contains(#""timestamp":\#(seconds)"#))
        }
    }

    /// The end says when the order ended, not the ETA the merchant promised: delivered 30 minutes
    /// early, the final state carries the delivery time, and the app's own types decode it.
    @Test func theEndCarriesWhenTheOrderEnded() throws {
        for status in [OrderStatus.delivered, .cancelled] {
            let order = Fixtures.order(
                status: status, eta: Fixtures.placedAt.addingTimeInterval(3600),
                updatedAt: Fixtures.placedAt.addingTimeInterval(1800.4))
            let activity = ActivityContext(
                bundleID: "b", startedAt: Fixtures.placedAt, shown: Fixtures.shown(.delivering))
            let sent = try #require(push(try planner.planUpdate(order: order, activity: activity, now: Fixtures.now)))
            let payload = try JSONSerialization.jsonObject(with: Data(sent.payload)) as? [String: Any]
            let aps = try #require(payload?["aps"] as? [String: Any])
            let stateJSON = try JSONSerialization.data(withJSONObject: try #require(aps["content-state"]))
            let state = try JSONDecoder().decode(DeliveryAttributes.ContentState.self, from: stateJSON)
            #expect(state.endedAt == Fixtures.placedAt.addingTimeInterval(1800), "\(status)")
            #expect(state.estimatedArrival == Fixtures.placedAt.addingTimeInterval(3600))
        }
        let open = LiveActivityProjector().contentState(for: Fixtures.order(status: .delivering))
        #expect(open.endedAt == nil)
    }

    /// Replaying the same state, or moving the ETA by a few seconds, plans no push.
    @Test func repeatedStateIsSkipped() throws {
        let order = Fixtures.order(status: .pickup)
        var activity = ActivityContext(bundleID: "b", startedAt: Fixtures.placedAt, shown: Fixtures.shown(.preparing))
        let first = try #require(push(try planner.planUpdate(order: order, activity: activity, now: Fixtures.now)))
        activity.shown = ShownState(status: .pickup, fingerprint: first.fingerprint, timestamp: first.timestamp)

        #expect(try planner.planUpdate(order: order, activity: activity, now: Fixtures.now) == .skip(.unchangedState))
        let nudged = try order.changingEstimatedArrival(
            to: order.estimatedArrival.addingTimeInterval(20), by: .admin, at: Fixtures.now
        ).order
        #expect(try planner.planUpdate(order: nudged, activity: activity, now: Fixtures.now) == .skip(.unchangedState))

        let moved = try order.changingEstimatedArrival(
            to: order.estimatedArrival.addingTimeInterval(300), by: .admin, at: Fixtures.now
        ).order
        let update = try #require(push(try planner.planUpdate(order: moved, activity: activity, now: Fixtures.now)))
        #expect(update.headers.priority == 5)
        #expect(!update.hasAlert)
        #expect(update.fingerprint != first.fingerprint)
    }

    /// A status repeat keeps the fingerprint: a replayed transition gives identical bytes, never a second push.
    @Test func fingerprintIsStable() {
        let projector = LiveActivityProjector()
        let a = projector.contentState(for: Fixtures.order(status: .delivering))
        let b = projector.contentState(for: Fixtures.order(status: .delivering))
        #expect(projector.encode(a) == projector.encode(b))
        #expect(projector.fingerprint(a) == projector.fingerprint(b))
        #expect(projector.fingerprint(a).count == 16)
        let c = projector.contentState(for: Fixtures.order(status: .delivering, rider: nil))
        #expect(projector.fingerprint(a) != projector.fingerprint(c))
    }

    /// Past the hourly budget a priority-10 update goes out at 5; the end push stays at 10.
    @Test func budgetDowngradesPriority() throws {
        var activity = ActivityContext(
            bundleID: "b", startedAt: Fixtures.placedAt, shown: Fixtures.shown(.pickup), highPriorityPushesInLastHour: 5
        )
        #expect(
            push(
                try planner.planUpdate(
                    order: Fixtures.order(status: .delivering), activity: activity, now: Fixtures.now))?.headers
                .priority == 10)
        activity.highPriorityPushesInLastHour = 6
        #expect(
            push(
                try planner.planUpdate(
                    order: Fixtures.order(status: .delivering), activity: activity, now: Fixtures.now))?.headers
                .priority == 5)
        #expect(
            push(
                try planner.planUpdate(order: Fixtures.order(status: .delivered), activity: activity, now: Fixtures.now)
            )?.headers.priority == 10)
    }

    /// The budget is read only for the updates `mayUseHighPriority` names (the pusher counts the push
    /// log for those alone): past the budget, every other update's priority stays as it was.
    @Test func onlyTheUpdatesItNamesReadTheBudget() throws {
        let statuses: [OrderStatus?] = [nil, .placed, .preparing, .pickup, .delivering]
        for shown in statuses {
            for status in [OrderStatus.preparing, .pickup, .delivering] {
                let order = Fixtures.order(status: status)
                let shownState = shown.map { Fixtures.shown($0) }
                let budgetLeft = ActivityContext(bundleID: "b", startedAt: Fixtures.placedAt, shown: shownState)
                let budgetSpent = ActivityContext(
                    bundleID: "b", startedAt: Fixtures.placedAt, shown: shownState, highPriorityPushesInLastHour: 1_000)
                let withBudget = push(try planner.planUpdate(order: order, activity: budgetLeft, now: Fixtures.now))
                let without = push(try planner.planUpdate(order: order, activity: budgetSpent, now: Fixtures.now))
                let named = PushPlanner.mayUseHighPriority(order: order, shown: shownState)
                #expect(
                    (withBudget?.headers.priority == 10) == named, "shown \(String(describing: shown)), now \(status)")
                if !named { #expect(without?.headers.priority == withBudget?.headers.priority) }
            }
        }
    }

    /// Nothing goes to an activity older than 8 hours, and stale-date never points past its lifetime.
    @Test func lifetime() throws {
        let startedAt = Fixtures.now.addingTimeInterval(-8 * 3600 + 60)
        let activity = ActivityContext(bundleID: "b", startedAt: startedAt, shown: Fixtures.shown(.placed))
        let order = Fixtures.order(status: .pickup, eta: Fixtures.now.addingTimeInterval(3600))
        let sent = try #require(push(try planner.planUpdate(order: order, activity: activity, now: Fixtures.now)))
        let end = startedAt.addingTimeInterval(8 * 3600)
        #expect(sent.headers.expiration == end)
        #expect(
            String(decoding: sent.payload, as: UTF8.self).contains(#""stale-date":\#(Int(end.timeIntervalSince1970))"#))
        #expect(try planner.planUpdate(order: order, activity: activity, now: end) == .skip(.activityExpired))
    }

    /// A late order (ETA 40 minutes ago): every update, the start and the end carry a stale date and an
    /// expiration at least the minimum freshness from now, so iOS does not grey the activity out and
    /// APNs keeps the push for a phone that is offline for a moment.
    @Test(arguments: OrderStatus.allCases)
    func lateOrdersStayFresh(status: OrderStatus) throws {
        var configuration = ProjectionConfiguration()
        configuration.dismissalDelay = 0
        let planner = PushPlanner(configuration: configuration)
        let now = Fixtures.now
        let late = Fixtures.order(status: status, eta: now.addingTimeInterval(-40 * 60))
        let activity = ActivityContext(bundleID: "b", startedAt: Fixtures.placedAt)
        let freshUntil = now.addingTimeInterval(15 * 60)
        let update = try #require(push(try planner.planUpdate(order: late, activity: activity, now: now)))
        #expect(update.headers.expiration >= freshUntil)
        let aps = try Self.aps(update)
        if status.isFinal {
            #expect(update.event == .end)
            // Dismissed at once on a phone that gets it, yet kept by APNs for one that is offline.
            #expect(aps["dismissal-date"] as? Int == Int(now.timeIntervalSince1970))
        } else {
            #expect(try #require(aps["stale-date"] as? Int) >= Int(freshUntil.timeIntervalSince1970))
            let start = try #require(push(try planner.planStart(order: late, bundleID: "b", now: now)))
            #expect(start.headers.expiration >= freshUntil)
            #expect(try #require(Self.aps(start)["stale-date"] as? Int) >= Int(freshUntil.timeIntervalSince1970))
        }
    }

    /// The freshness floor is a setting; an order on time keeps ETA + grace.
    @Test func freshnessFloorIsASetting() throws {
        var configuration = ProjectionConfiguration()
        configuration.staleGrace = 300
        configuration.minimumFreshness = 3600
        let planner = PushPlanner(configuration: configuration)
        let onTime = Fixtures.order(status: .pickup, eta: Fixtures.now.addingTimeInterval(7200))
        let activity = ActivityContext(bundleID: "b", startedAt: Fixtures.placedAt)
        let sent = try #require(push(try planner.planUpdate(order: onTime, activity: activity, now: Fixtures.now)))
        #expect(sent.headers.expiration == Fixtures.now.addingTimeInterval(7200 + 300))
        let late = Fixtures.order(status: .pickup, eta: Fixtures.now.addingTimeInterval(-60))
        let lateSent = try #require(push(try planner.planUpdate(order: late, activity: activity, now: Fixtures.now)))
        #expect(lateSent.headers.expiration == Fixtures.now.addingTimeInterval(3600))
    }

    static func aps(_ push: LiveActivityPush) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(push.payload)) as? [String: Any]
        return try #require(object?["aps"] as? [String: Any])
    }

    /// An order that already ended starts no activity.
    @Test func noStartForEndedOrder() throws {
        #expect(
            try planner.planStart(order: Fixtures.order(status: .delivered), bundleID: "b", now: Fixtures.now)
                == .skip(.orderAlreadyEnded))
    }

    /// A payload that cannot fit 4096 bytes is refused, naming the field that takes the most room.
    @Test func oversizedPayloadNamesField() throws {
        var configuration = ProjectionConfiguration()
        configuration.merchantNameLimit = 10_000
        let planner = PushPlanner(configuration: configuration)
        let order = Fixtures.order(status: .placed, merchantName: String(repeating: "Pizza ", count: 800))
        #expect(throws: PayloadTooLargeError.self) {
            try planner.planStart(order: order, bundleID: "b", now: Fixtures.now)
        }
        do {
            _ = try planner.planStart(order: order, bundleID: "b", now: Fixtures.now)
        } catch {
            #expect(error.largestField == "merchantName")
            #expect(error.size > 4096)
        }
        let trimmed = try #require(push(try PushPlanner().planStart(order: order, bundleID: "b", now: Fixtures.now)))
        #expect(trimmed.payload.count <= 4096)
    }
}
