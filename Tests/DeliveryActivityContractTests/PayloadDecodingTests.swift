import DeliveryActivityClient
import DeliveryActivityContract
import Foundation
import OrderDomain
import Projection
import Testing

/// The APNs body as ActivityKit reads it: `content-state` and `attributes` decoded with a default
/// `JSONDecoder` into the client package's types.
struct ActivityKitPayload: Decodable {
    struct APS: Decodable {
        var event: String
        var timestamp: Int
        var contentState: DeliveryAttributes.ContentState
        var attributes: DeliveryAttributes?
        var attributesType: String?

        enum CodingKeys: String, CodingKey {
            case event, timestamp, attributes
            case contentState = "content-state"
            case attributesType = "attributes-type"
        }
    }

    var aps: APS

    static func decode(_ push: LiveActivityPush) throws -> APS {
        try JSONDecoder().decode(ActivityKitPayload.self, from: Data(push.payload)).aps
    }
}

@Suite("The server's payloads decode into the client package's types")
struct PayloadDecodingTests {
    static let placedAt = Date(timeIntervalSince1970: 1_796_212_800)
    static let now = placedAt.addingTimeInterval(600)
    static let locales = ["en-US", "de-DE", "zh-Hans-CN", "fr-FR"]

    /// Every status, event and language: the decoded state equals the projected one field for field,
    /// the ETA to the second, and a start's attributes carry the order id the woken app registers with.
    @Test(arguments: OrderStatus.allCases, locales)
    func everyStatusEventAndLocale(status: OrderStatus, locale: String) throws {
        let eta = Self.placedAt.addingTimeInterval(1800)
        let order = Self.order(status: status, locale: locale, eta: eta)
        let planner = PushPlanner()
        let activity = ActivityContext(bundleID: "com.example.app", startedAt: Self.placedAt)
        let update = try #require(Self.sent(try planner.planUpdate(order: order, activity: activity, now: Self.now)))
        let decoded = try ActivityKitPayload.decode(update)
        #expect(decoded.event == (status.isFinal ? "end" : "update"))
        #expect(decoded.contentState == update.contentState)
        #expect(decoded.contentState.estimatedArrival == eta)
        #expect(decoded.contentState.knownStatus?.rawValue == status.rawValue)
        #expect(decoded.timestamp == Int(Self.now.timeIntervalSince1970))

        guard !status.isFinal else { return }
        let start = try #require(Self.sent(try planner.planStart(order: order, bundleID: "b", now: Self.now)))
        let started = try ActivityKitPayload.decode(start)
        #expect(started.event == "start")
        #expect(started.attributesType == String(describing: DeliveryAttributes.self))
        #expect(
            started.attributes == DeliveryAttributes(orderId: "o_1", orderNumber: "A-1001", merchantName: "Pizza Roma"))
        #expect(started.contentState == start.contentState)
    }

    /// 10,000 orders with random statuses, languages, ETAs off the minute and hostile free text
    /// (quotes, backslashes, control characters, emoji, long names) decode exactly as projected.
    @Test func tenThousandFuzzedOrders() throws {
        var random = SplitMix64(seed: 0x5EED_DE11)
        let planner = PushPlanner()
        let projector = planner.projector
        let pieces = [
            "Pizza", "\"Roma\"", "back\\slash", "tab\there", "line\nbreak", "🍕", "Ünïcödé", "中文", "\u{0}", " ",
        ]
        func text(_ maximum: Int) -> String {
            (0..<Int.random(in: 1...maximum, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined(separator: " ")
        }
        for index in 0..<10_000 {
            let status = OrderStatus.allCases.randomElement(using: &random)!
            let eta = Self.now.addingTimeInterval(Double.random(in: -86_400...86_400, using: &random))
            let rider = Bool.random(using: &random) ? Rider(id: "r", name: text(4), phone: nil) : nil
            let order = Self.order(
                status: status, locale: Self.locales.randomElement(using: &random)!, eta: eta, merchantName: text(12),
                number: "N-\(index)-" + text(2), rider: rider)
            let activity = ActivityContext(bundleID: "com.example.app", startedAt: Self.now.addingTimeInterval(-60))
            let push = try #require(Self.sent(try planner.planUpdate(order: order, activity: activity, now: Self.now)))
            let decoded = try ActivityKitPayload.decode(push)
            let expected = projector.contentState(for: order)
            #expect(decoded.contentState == expected, "order \(index)")
            #expect(
                decoded.contentState.estimatedArrival.timeIntervalSince1970
                    == (eta.timeIntervalSince1970 / 60).rounded() * 60)
            if !status.isFinal, index % 10 == 0 {
                let start = try #require(Self.sent(try planner.planStart(order: order, bundleID: "b", now: Self.now)))
                #expect(try ActivityKitPayload.decode(start).attributes == projector.attributes(for: order))
            }
        }
    }

    /// `GET /live-activity`'s two objects are the same bytes as in a push: they decode the same way.
    @Test func localStartShapeDecodes() throws {
        let projector = LiveActivityProjector()
        let order = Self.order(status: .pickup, locale: "de-DE", eta: Self.now.addingTimeInterval(900))
        let state = try JSONDecoder().decode(
            DeliveryAttributes.ContentState.self, from: Data(projector.encode(projector.contentState(for: order))))
        let attributes = try JSONDecoder().decode(
            DeliveryAttributes.self, from: Data(projector.encode(projector.attributes(for: order))))
        #expect(state == projector.contentState(for: order))
        #expect(attributes.orderId == "o_1")
    }

    /// The snapshot's `startAt` is the API's RFC 3339 time (milliseconds, or whole seconds), read to
    /// the millisecond; written back it reads the same; a snapshot without it (an ended order) has none.
    @Test func snapshotCarriesWhenToStart() throws {
        let projector = LiveActivityProjector()
        let order = Self.order(status: .placed, locale: "en-US", eta: Self.now.addingTimeInterval(86_400))
        let objects =
            #"{"attributes":"# + String(decoding: projector.encode(projector.attributes(for: order)), as: UTF8.self)
            + #","contentState":"#
            + String(decoding: projector.encode(projector.contentState(for: order)), as: UTF8.self)
        let preOrder = try JSONDecoder().decode(
            LiveActivitySnapshot.self, from: Data((objects + #","startAt":"2026-12-06T11:00:00.250Z"}"#).utf8))
        #expect(preOrder.startAt?.timeIntervalSince1970 == 1_796_554_800.25)
        let roundTrip = try JSONDecoder().decode(LiveActivitySnapshot.self, from: JSONEncoder().encode(preOrder))
        #expect(roundTrip == preOrder)
        let wholeSeconds = try JSONDecoder().decode(
            LiveActivitySnapshot.self, from: Data((objects + #","startAt":"2026-12-06T11:00:00Z"}"#).utf8))
        #expect(wholeSeconds.startAt?.timeIntervalSince1970 == 1_796_554_800)
        #expect(try JSONDecoder().decode(LiveActivitySnapshot.self, from: Data((objects + "}").utf8)).startAt == nil)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                LiveActivitySnapshot.self, from: Data((objects + #","startAt":"tomorrow"}"#).utf8))
        }
    }

    static func sent(_ decision: PushDecision) -> LiveActivityPush? {
        if case .send(let push) = decision { return push }
        return nil
    }

    static func order(
        status: OrderStatus, locale: String, eta: Date, merchantName: String = "Pizza Roma", number: String = "A-1001",
        rider: Rider? = Rider(id: "r-7", name: "Marco Rossi", phone: nil)
    ) -> Order {
        Order(
            id: "o_1", merchantID: "m-1", number: number, merchantName: merchantName,
            items: [LineItem(name: "Margherita", quantity: 2, price: 8.5)],
            customer: Customer(id: "c-42", name: "Ana Lima", phone: "+49 30 1234567", locale: locale),
            address: "Hauptstr. 1, 10115 Berlin", payment: Payment(method: "card", brand: "visa", last4: "4242"),
            note: "ring twice", status: status, cancelledAt: status == .cancelled ? .pickup : nil,
            estimatedArrival: eta, rider: rider, createdAt: placedAt, updatedAt: placedAt
        )
    }
}

/// A small seeded generator, so that the fuzzed orders are the same on every run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
