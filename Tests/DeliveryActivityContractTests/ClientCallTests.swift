import DeliveryActivityClient
import DeliveryActivityContract
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("The calls the app makes")
struct ClientCallTests {
    static let token = Data([0x80, 0xF3, 0x00, 0x0A, 0xFF, 0x01, 0x02, 0x03])
    static let shown = DeliveryAttributes.ContentState(
        status: "placed", stage: 0, progress: 0, statusText: "Order placed",
        estimatedArrival: Date(timeIntervalSinceReferenceDate: 817_907_400), riderName: nil)

    /// Registering an activity token: the path of the order and activity, the bearer credential, and
    /// a body with the lowercase hex token and the shown state in the app's own date encoding.
    @Test func registerActivity() throws {
        let request = DeliveryAPICalls.registerActivity(
            orderId: "o_1f", activityId: "A:1", pushToken: Self.token, environment: .development,
            bundleId: "com.example.app", shownState: Self.shown, credential: "dc_c1_secret")
        #expect(request.method == "PUT")
        #expect(request.path == "/v1/orders/o_1f/activities/A:1")
        #expect(request.headers == ["Authorization": "Bearer dc_c1_secret", "Content-Type": "application/json"])
        let body = try #require(request.body)
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(object["pushToken"] as? String == "80f3000aff010203")
        #expect(object["environment"] as? String == "development")
        #expect(object["bundleId"] as? String == "com.example.app")
        let state = try #require(object["contentState"] as? [String: Any])
        #expect(state["estimatedArrival"] as? Double == 817_907_400)
        #expect(state["riderName"] == nil)
    }

    /// Push-to-start, ending and reading: their paths and methods; identifiers outside the safe set
    /// are percent-encoded rather than breaking the path.
    @Test func otherCalls() {
        let start = DeliveryAPICalls.registerPushToStart(
            customerId: "c 42/x", deviceId: "iphone-1", pushToken: Self.token, environment: .production, bundleId: nil,
            credential: "dc_c1_s")
        #expect(start.method == "PUT" && start.path == "/v1/customers/c%2042%2Fx/push-to-start/iphone-1")
        #expect(
            start.body.map { String(decoding: $0, as: UTF8.self) }
                == #"{"environment":"production","pushToken":"80f3000aff010203"}"#)
        let end = DeliveryAPICalls.endActivity(orderId: "o_1", activityId: "a", credential: "dt_x")
        #expect(end.method == "DELETE" && end.path == "/v1/orders/o_1/activities/a" && end.body == nil)
        let remove = DeliveryAPICalls.removePushToStart(customerId: "c-42", deviceId: "d", credential: "dc_c1_s")
        #expect(remove.method == "DELETE" && remove.path == "/v1/customers/c-42/push-to-start/d")
        let read = DeliveryAPICalls.liveActivity(orderId: "o_1", credential: "dt_x")
        #expect(read.method == "GET" && read.path == "/v1/orders/o_1/live-activity")
    }

    /// The `URLRequest` the app hands to `URLSession` carries the same method, URL, headers and body.
    @Test func urlRequest() throws {
        let call = DeliveryAPICalls.registerActivity(
            orderId: "o_1", activityId: "a", pushToken: Self.token, environment: .production, bundleId: nil,
            shownState: nil, credential: "dt_x")
        let request = call.urlRequest(baseURL: try #require(URL(string: "https://deliveryd.example.com/")))
        #expect(request.url?.absoluteString == "https://deliveryd.example.com/v1/orders/o_1/activities/a")
        #expect(request.httpMethod == "PUT")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer dt_x")
        #expect(request.httpBody == call.body)
    }
}
