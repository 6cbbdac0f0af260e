public import DeliveryActivityContract
public import Foundation

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// One call of the deliveryd API, as plain values: the app sends it with `URLSession`
/// (`urlRequest(baseURL:)`), tests send the same bytes over a socket.
public struct DeliveryAPIRequest: Sendable, Hashable {
    public var method: String
    /// Percent-encoded, starting with `/`.
    public var path: String
    public var headers: [String: String]
    public var body: Data?

    /// The request relative to the server's base URL (`https://deliveryd.example.com`).
    public func urlRequest(baseURL: URL) -> URLRequest {
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        // The path is built from percent-encoded segments only, so the URL always parses.
        var request = URLRequest(url: URL(string: base + path) ?? baseURL)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        return request
    }
}

/// Which APNs host a token belongs to: `development` for builds signed for development (Xcode runs),
/// `production` for TestFlight and App Store builds.
public enum APNsEnvironment: String, Codable, Sendable {
    case development
    case production
}

/// What `GET /v1/orders/{id}/live-activity` answers: what to start the activity with locally.
public struct LiveActivitySnapshot: Codable, Hashable, Sendable {
    public var attributes: DeliveryAttributes
    public var contentState: DeliveryAttributes.ContentState
    /// When to start the activity: now, or for a pre-order an hour (the server's lead time) before it
    /// is due, since iOS ends an activity 8 hours after it starts. `nil` once the order ended (or
    /// from a server that does not say).
    public var startAt: Date?

    public init(attributes: DeliveryAttributes, contentState: DeliveryAttributes.ContentState, startAt: Date? = nil) {
        self.attributes = attributes
        self.contentState = contentState
        self.startAt = startAt
    }

    private enum CodingKeys: String, CodingKey {
        case attributes, contentState, startAt
    }

    /// `startAt` is an RFC 3339 time, like every time of the API outside `contentState`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        attributes = try container.decode(DeliveryAttributes.self, forKey: .attributes)
        contentState = try container.decode(DeliveryAttributes.ContentState.self, forKey: .contentState)
        startAt = try container.decodeIfPresent(String.self, forKey: .startAt).map { text in
            guard let date = Self.rfc3339(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .startAt, in: container, debugDescription: "not an RFC 3339 time: \(text)")
            }
            return date
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(attributes, forKey: .attributes)
        try container.encode(contentState, forKey: .contentState)
        try container.encodeIfPresent(startAt?.formatted(Self.withFraction), forKey: .startAt)
    }

    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    private static func rfc3339(_ text: String) -> Date? {
        (try? Date(text, strategy: withFraction)) ?? (try? Date(text, strategy: .iso8601))
    }
}

/// The calls the customer's app makes, built so that the server and the app cannot disagree on a path,
/// a field or a date format.
///
/// Credentials: the order's tracking token (`dt_…`, from the merchant's order confirmation) or the
/// customer credential (`dc_…`, that the merchant's backend minted for the signed-in customer). A
/// device registers push-to-start with the customer credential; an app woken by a `start` push registers
/// the new activity's token with the same credential and the `orderId` of the activity's attributes.
public enum DeliveryAPICalls {
    /// `PUT /v1/orders/{orderId}/activities/{activityId}`: the activity's push token, first or rotated.
    ///
    /// - Parameters:
    ///   - pushToken: the bytes of `activity.pushTokenUpdates`.
    ///   - bundleId: the app's bundle id; `nil` lets the server use its default app.
    ///   - shownState: `activity.content.state`, what the activity shows now; the server pushes the
    ///     order's current state at once when it differs (a status that changed before the token came).
    ///   - credential: a tracking token or customer credential.
    public static func registerActivity(
        orderId: String, activityId: String, pushToken: Data, environment: APNsEnvironment, bundleId: String?,
        shownState: DeliveryAttributes.ContentState?, credential: String
    ) -> DeliveryAPIRequest {
        let body = TokenRegistration(
            pushToken: hex(pushToken), environment: environment, bundleId: bundleId, contentState: shownState)
        return json("PUT", "/v1/orders/\(segment(orderId))/activities/\(segment(activityId))", body, credential)
    }

    /// `DELETE /v1/orders/{orderId}/activities/{activityId}`: the user ended the activity; no more pushes.
    public static func endActivity(orderId: String, activityId: String, credential: String) -> DeliveryAPIRequest {
        DeliveryAPIRequest(
            method: "DELETE", path: "/v1/orders/\(segment(orderId))/activities/\(segment(activityId))",
            headers: ["Authorization": "Bearer " + credential], body: nil)
    }

    /// `PUT /v1/customers/{customerId}/push-to-start/{deviceId}`: the device's push-to-start token
    /// (`Activity<DeliveryAttributes>.pushToStartTokenUpdates`), with the customer credential.
    public static func registerPushToStart(
        customerId: String, deviceId: String, pushToken: Data, environment: APNsEnvironment, bundleId: String?,
        credential: String
    ) -> DeliveryAPIRequest {
        let body = TokenRegistration(
            pushToken: hex(pushToken), environment: environment, bundleId: bundleId, contentState: nil)
        return json("PUT", "/v1/customers/\(segment(customerId))/push-to-start/\(segment(deviceId))", body, credential)
    }

    /// `DELETE /v1/customers/{customerId}/push-to-start/{deviceId}`: the customer signed out on this device.
    public static func removePushToStart(customerId: String, deviceId: String, credential: String)
        -> DeliveryAPIRequest
    {
        DeliveryAPIRequest(
            method: "DELETE", path: "/v1/customers/\(segment(customerId))/push-to-start/\(segment(deviceId))",
            headers: ["Authorization": "Bearer " + credential], body: nil)
    }

    /// `GET /v1/orders/{orderId}/live-activity`: attributes and state to start the activity locally;
    /// decode the answer as `LiveActivitySnapshot` with a default `JSONDecoder`.
    public static func liveActivity(orderId: String, credential: String) -> DeliveryAPIRequest {
        DeliveryAPIRequest(
            method: "GET", path: "/v1/orders/\(segment(orderId))/live-activity",
            headers: ["Authorization": "Bearer " + credential], body: nil)
    }

    /// Lowercase hex, the form APNs and deliveryd use for device tokens.
    public static func hex(_ token: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(token.count * 2)
        for byte in token {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private struct TokenRegistration: Encodable {
        let pushToken: String
        let environment: APNsEnvironment
        let bundleId: String?
        let contentState: DeliveryAttributes.ContentState?
    }

    private static func json(_ method: String, _ path: String, _ body: some Encodable, _ credential: String)
        -> DeliveryAPIRequest
    {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding these plain structs cannot fail: no floats that are not finite, no custom encoders.
        let data = (try? encoder.encode(body)) ?? Data()
        return DeliveryAPIRequest(
            method: method, path: path,
            headers: ["Authorization": "Bearer " + credential, "Content-Type": "application/json"], body: data)
    }

    /// One path segment, percent-encoded; RFC 3986's unreserved characters and `:` stay as they are
    /// (deliveryd's identifiers are made of those only, and it refuses any other).
    static func segment(_ value: String) -> String {
        var encoded = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: ":"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".unicodeScalars)
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(digits[Int(byte >> 4)])
                encoded.unicodeScalars.append(digits[Int(byte & 0x0F)])
            }
        }
        return encoded
    }
}
