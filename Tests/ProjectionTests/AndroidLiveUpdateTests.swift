import DeliveryActivityContract
import Foundation
import OrderDomain
import Testing

@testable import Projection

@Suite("Android Live Updates: the FCM message")
struct AndroidLiveUpdateTests {
    /// The message is data-only: the projector's state byte for byte, the version, the event and the
    /// dismissal time as strings, FCM's priority and TTL, the device's token, and nothing else.
    @Test func theMessageCarriesTheStateAsData() throws {
        let projector = LiveActivityProjector()
        let order = Fixtures.order(status: .delivered)
        let state = projector.encode(projector.contentState(for: order))
        let attributes = projector.encode(projector.attributes(for: order))
        let update = AndroidLiveUpdate(
            attributes: attributes, contentState: state, version: 7, event: .end,
            dismissAt: Fixtures.now.addingTimeInterval(900),
            highPriority: true, timeToLive: 3600)
        let body = try #require(update.requestBody(registrationToken: "fcm-token-1"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let message = try #require(object["message"] as? [String: Any])
        #expect(Set(message.keys) == ["android", "data", "token"])
        #expect(message["token"] as? String == "fcm-token-1")
        #expect(message["android"] as? [String: String] == ["priority": "HIGH", "ttl": "3600s"])
        let data = try #require(message["data"] as? [String: String])
        #expect(
            data == [
                "event": "end", "version": "7", "state": String(decoding: state, as: UTF8.self),
                "attributes": String(decoding: attributes, as: UTF8.self),
                "dismissAt": String(Int(Fixtures.now.timeIntervalSince1970) + 900),
            ])
        #expect(update.dataBytes == data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count })
        // What the app decodes from `state` and `attributes` is what the iOS activity gets.
        #expect(Array(data["state"]!.utf8) == state && Array(data["attributes"]!.utf8) == attributes)
        #expect(data["attributes"]?.contains(order.id) == true)
    }

    /// An update that may wait goes at normal priority, without a dismissal time.
    @Test func routineUpdatesGoAtNormalPriority() throws {
        let update = AndroidLiveUpdate(
            attributes: Array(#"{"orderId":"o_1"}"#.utf8), contentState: Array(#"{"status":"delivering"}"#.utf8),
            version: 2, event: .update, highPriority: false,
            timeToLive: 600)
        let text = String(decoding: try #require(update.requestBody(registrationToken: "t")), as: UTF8.self)
        #expect(text.contains(#""priority":"NORMAL""#) && text.contains(#""ttl":"600s""#))
        #expect(!text.contains("dismissAt") && !text.contains("collapse_key") && !text.contains("notification"))
    }

    /// FCM's 4 KB limit on data is counted as FCM counts it (keys and values), and a message over it
    /// is not built.
    @Test func dataOverFourKilobytesIsRefused() {
        func update(stateBytes: Int) -> AndroidLiveUpdate {
            AndroidLiveUpdate(
                attributes: Array(#"{"orderId":"o_1"}"#.utf8),
                contentState: Array(repeating: UInt8(ascii: "x"), count: stateBytes), version: 1, event: .update,
                highPriority: true, timeToLive: 60)
        }
        let overhead = update(stateBytes: 0).dataBytes
        #expect(update(stateBytes: 4096 - overhead).requestBody(registrationToken: "t") != nil)
        #expect(update(stateBytes: 4097 - overhead).requestBody(registrationToken: "t") == nil)
    }
}
