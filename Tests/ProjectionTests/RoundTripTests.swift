import Foundation
import OrderDomain
import Projection
import Testing

/// Declared exactly as the iOS app declares `DeliveryAttributes` (minus the ActivityKit conformance).
struct AppDeliveryAttributes: Codable, Hashable {
    var orderNumber: String
    var merchantName: String

    struct ContentState: Codable, Hashable {
        var status: String
        var stage: Int
        var progress: Double
        var statusText: String
        var estimatedArrival: Date
        var riderName: String?
    }
}

/// The APNs body as far as the test needs to read it.
struct DecodedPayload: Decodable {
    struct APS: Decodable {
        var event: String
        var timestamp: Int
        var contentState: AppDeliveryAttributes.ContentState
        var attributes: AppDeliveryAttributes?

        enum CodingKeys: String, CodingKey {
            case event, timestamp, attributes
            case contentState = "content-state"
        }
    }

    var aps: APS
}

@Suite("Round trip through a default JSONDecoder")
struct RoundTripTests {
    /// What ActivityKit does: a default `JSONDecoder` reads the content-state, dates included, to the second.
    @Test(arguments: OrderStatus.allCases)
    func contentStateDecodesAsTheAppDoes(status: OrderStatus) throws {
        let eta = Date(timeIntervalSince1970: 1_796_214_600)
        let order = Fixtures.order(status: status, eta: eta)
        let planner = PushPlanner()
        let activity = ActivityContext(bundleID: "com.example.app", startedAt: Fixtures.placedAt)
        guard case .send(let push) = try planner.planUpdate(order: order, activity: activity, now: Fixtures.now) else {
            Issue.record("expected a push")
            return
        }
        let decoded = try JSONDecoder().decode(DecodedPayload.self, from: Data(push.payload))
        let state = decoded.aps.contentState
        #expect(state.status == status.rawValue)
        #expect(state.stage == order.stage)
        #expect(state.progress == Double(order.stage) / 4)
        #expect(state.statusText == Language.english.statusText(status))
        #expect(state.estimatedArrival == eta)
        #expect(state.riderName == "Marco")
        #expect(decoded.aps.event == (status.isTerminal ? "end" : "update"))
        #expect(decoded.aps.timestamp == Int(Fixtures.now.timeIntervalSince1970))
    }

    /// The start push's attributes decode into the app's attribute struct.
    @Test func attributesDecode() throws {
        let order = Fixtures.order(status: .placed, rider: nil)
        guard case .send(let push) = try PushPlanner().planStart(order: order, bundleID: "b", now: Fixtures.now) else {
            Issue.record("expected a push")
            return
        }
        let decoded = try JSONDecoder().decode(DecodedPayload.self, from: Data(push.payload))
        #expect(decoded.aps.attributes == AppDeliveryAttributes(orderNumber: "A-1001", merchantName: "Pizza Roma"))
        #expect(decoded.aps.contentState.riderName == nil)
    }

    /// An ETA off the minute is rounded to the nearest minute, the unit the app shows.
    @Test func etaIsRoundedToTheMinute() throws {
        let projector = LiveActivityProjector()
        let state = projector.contentState(
            for: Fixtures.order(status: .pickup, eta: Date(timeIntervalSince1970: 1_796_214_629))
        )
        #expect(state.estimatedArrival == Date(timeIntervalSince1970: 1_796_214_600))
        let later = projector.contentState(
            for: Fixtures.order(status: .pickup, eta: Date(timeIntervalSince1970: 1_796_214_631))
        )
        #expect(later.estimatedArrival == Date(timeIntervalSince1970: 1_796_214_660))
    }
}
