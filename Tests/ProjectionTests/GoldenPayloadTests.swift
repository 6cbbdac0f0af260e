import DeliveryActivityContract
import FoundationEssentials
import OrderDomain
import Projection
import Testing

/// The exact bytes of each push. Times: now 12:10Z = Unix 1796213400; ETA 12:30Z = reference-date 817907400;
/// stale-date ETA + 15 min = 1796215500; dismissal-date now + 15 min = 1796214300.
@Suite("Golden payloads")
struct GoldenPayloadTests {
    let planner = PushPlanner()
    let activity = ActivityContext(
        bundleID: "com.example.app", startedAt: Fixtures.placedAt, shown: Fixtures.shown(.placed))

    static let goldenUpdates: [(OrderStatus, String)] = [
        (
            .preparing,
            #"{"aps":{"content-state":{"estimatedArrival":817907400,"progress":0.25,"riderName":"Marco","stage":1,"status":"preparing","statusText":"Preparing your order"},"event":"update","relevance-score":60,"stale-date":1796215500,"timestamp":1796213400}}"#
        ),
        (
            .pickup,
            #"{"aps":{"content-state":{"estimatedArrival":817907400,"progress":0.5,"riderName":"Marco","stage":2,"status":"pickup","statusText":"Rider picking up"},"event":"update","relevance-score":80,"stale-date":1796215500,"timestamp":1796213400}}"#
        ),
        (
            .delivering,
            #"{"aps":{"alert":{"body":"Marco is bringing your order.","sound":"default","title":"On the way"},"content-state":{"estimatedArrival":817907400,"progress":0.75,"riderName":"Marco","stage":3,"status":"delivering","statusText":"On the way"},"event":"update","relevance-score":100,"stale-date":1796215500,"timestamp":1796213400}}"#
        ),
        (
            .delivered,
            #"{"aps":{"alert":{"body":"Your order from Pizza Roma has arrived.","sound":"default","title":"Delivered"},"content-state":{"endedAt":817905600,"estimatedArrival":817907400,"progress":1,"riderName":"Marco","stage":4,"status":"delivered","statusText":"Delivered"},"dismissal-date":1796214300,"event":"end","relevance-score":10,"timestamp":1796213400}}"#
        ),
        (
            .cancelled,
            #"{"aps":{"alert":{"body":"Your order from Pizza Roma was cancelled.","sound":"default","title":"Order cancelled"},"content-state":{"endedAt":817905600,"estimatedArrival":817907400,"progress":0.5,"riderName":"Marco","stage":2,"status":"cancelled","statusText":"Cancelled"},"dismissal-date":1796214300,"event":"end","relevance-score":10,"timestamp":1796213400}}"#
        ),
    ]

    /// Each status produces exactly the expected update or end payload, byte for byte.
    @Test(arguments: goldenUpdates)
    func updateAndEndPayloads(status: OrderStatus, expected: String) throws {
        let decision = try planner.planUpdate(
            order: Fixtures.order(status: status), activity: activity, now: Fixtures.now)
        guard case .send(let push) = decision else {
            Issue.record("expected a push, got \(decision)")
            return
        }
        #expect(String(decoding: push.payload, as: UTF8.self) == expected)
    }

    /// The start push carries attributes, their type, an alert and asks for an update token.
    @Test func startPayload() throws {
        let decision = try planner.planStart(
            order: Fixtures.order(status: .placed, rider: nil), bundleID: "com.example.app", now: Fixtures.now
        )
        guard case .send(let push) = decision else {
            Issue.record("expected a push, got \(decision)")
            return
        }
        #expect(
            String(decoding: push.payload, as: UTF8.self)
                == #"{"aps":{"alert":{"body":"Pizza Roma has received your order.","sound":"default","title":"Order placed"},"attributes":{"merchantName":"Pizza Roma","orderId":"o-1","orderNumber":"A-1001"},"attributes-type":"DeliveryAttributes","content-state":{"estimatedArrival":817907400,"progress":0,"stage":0,"status":"placed","statusText":"Order placed"},"event":"start","input-push-token":1,"relevance-score":40,"stale-date":1796215500,"timestamp":1796213400}}"#
        )
        #expect(push.event == .start)
        #expect(push.headers.priority == 10)
        #expect(push.headers.topic == "com.example.app.push-type.liveactivity")
        #expect(push.headers.pushType == "liveactivity")
        #expect(push.headers.collapseID.map { $0.utf8.count <= 64 } == true)
    }

    /// German and simplified Chinese orders get their language; unknown ones fall back to English.
    @Test(arguments: [
        ("de-DE", "Unterwegs", "Marco bringt deine Bestellung."),
        ("zh-Hans-CN", "配送中", "Marco正在为您配送。"),
        ("zh-CN", "配送中", "Marco正在为您配送。"),
        ("zh-TW", "On the way", "Marco is bringing your order."),
        ("fr-FR", "On the way", "Marco is bringing your order."),
    ])
    func localisedTexts(locale: String, statusText: String, body: String) throws {
        let order = Fixtures.order(status: .delivering, locale: locale)
        guard case .send(let push) = try planner.planUpdate(order: order, activity: activity, now: Fixtures.now) else {
            Issue.record("expected a push")
            return
        }
        #expect(push.contentState.statusText == statusText)
        let text = String(decoding: push.payload, as: UTF8.self)
        #expect(text.contains(#""body":"\#(body)""#))
    }

    /// Every status label fits the 24-character limit in every language.
    @Test func statusTextsFit() {
        for language in Language.allCases {
            for status in OrderStatus.allCases {
                #expect(language.statusText(status).count <= 24, "\(language) \(status)")
            }
        }
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
