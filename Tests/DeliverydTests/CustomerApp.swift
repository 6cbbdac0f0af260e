import DeliveryActivityClient
import DeliveryActivityContract
import Foundation
import TestSupport

/// The customer's iOS app, as far as deliveryd sees it: the client package's calls, sent to a running
/// deliveryd, and its answers decoded with the package's types and a default `JSONDecoder`.
struct CustomerApp {
    let port: UInt16

    /// Sends one of the package's calls.
    func send(_ call: DeliveryAPIRequest) throws -> LoopbackHTTP.Response {
        try LoopbackHTTP.send(port: port, call.method, call.path, headers: call.headers, body: call.body)
    }

    /// What `GET /live-activity` answers, as the app decodes it to start the activity locally.
    func snapshot(orderId: String, credential: String) throws -> LiveActivitySnapshot {
        let response = try send(DeliveryAPICalls.liveActivity(orderId: orderId, credential: credential))
        guard response.status == 200 else {
            throw AppError(description: "live-activity: \(response.status) \(response.text)")
        }
        return try JSONDecoder().decode(LiveActivitySnapshot.self, from: response.body)
    }

    /// Starts the order's activity locally (with the state the server shows now) and registers its
    /// token as an app does: the server then pushes only what changes after this.
    @discardableResult
    func startLocally(
        orderId: String, activityId: String, hexToken: String, environment: APNsEnvironment, credential: String
    ) throws -> LoopbackHTTP.Response {
        let shown = try snapshot(orderId: orderId, credential: credential).contentState
        return try send(
            DeliveryAPICalls.registerActivity(
                orderId: orderId, activityId: activityId, pushToken: Self.bytes(hex: hexToken),
                environment: environment, bundleId: nil, shownState: shown, credential: credential))
    }

    /// The bytes of a hex token, as iOS hands them to the app.
    static func bytes(hex: String) -> Data {
        var data = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            data.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return data
    }
}

struct AppError: Error, CustomStringConvertible {
    let description: String
}
