public import Foundation

/// One Android Live Update as FCM carries it: a data-only message (the app builds the promoted
/// notification itself) holding the same public `ContentState` the iOS activity gets, plus what
/// Android lacks natively: a per-device version that only grows (so the app drops an older update
/// that arrives late), the event, and when to dismiss the notification after the end.
///
/// Data-only, so that nothing but the app decides what the notification shows, and nothing outside
/// the projection can reach the phone: the state is the projector's encoding, byte for byte.
public struct AndroidLiveUpdate: Sendable, Hashable {
    public enum Event: String, Sendable {
        case update
        case end
    }

    /// FCM refuses a message whose data (keys and values) is larger than this.
    public static let maximumDataBytes = 4096

    /// The `DeliveryAttributes` JSON, as `LiveActivityProjector.encode` writes it: which order (an
    /// FCM token is the phone's, shared by all its orders) and what the notification's title shows.
    public var attributes: [UInt8]
    /// The `ContentState` JSON, as `LiveActivityProjector.encode` writes it.
    public var contentState: [UInt8]
    public var version: Int64
    public var event: Event
    /// With `.end`: when the app removes the notification.
    public var dismissAt: Date?
    /// `HIGH` only where the customer must see it now (a status change); `NORMAL` otherwise, which
    /// Android may hold while the phone dozes.
    public var highPriority: Bool
    /// How long FCM keeps the message for a phone that is offline; past it, the update is stale.
    public var timeToLive: TimeInterval

    public init(
        attributes: [UInt8], contentState: [UInt8], version: Int64, event: Event, dismissAt: Date? = nil,
        highPriority: Bool, timeToLive: TimeInterval
    ) {
        self.attributes = attributes
        self.contentState = contentState
        self.version = version
        self.event = event
        self.dismissAt = dismissAt
        self.highPriority = highPriority
        self.timeToLive = timeToLive
    }

    /// The message's data: a flat map of strings, as FCM's `data` field requires.
    public var data: [(key: String, value: String)] {
        var pairs = [
            (key: "attributes", value: String(decoding: attributes, as: UTF8.self)),
            (key: "event", value: event.rawValue),
            (key: "state", value: String(decoding: contentState, as: UTF8.self)),
            (key: "version", value: String(version)),
        ]
        if let dismissAt {
            pairs.insert((key: "dismissAt", value: String(Int64(dismissAt.timeIntervalSince1970.rounded()))), at: 1)
        }
        return pairs
    }

    /// The size FCM counts against its limit: every key and value, in UTF-8.
    public var dataBytes: Int { data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } }

    /// The body of `POST …/v1/projects/{project}/messages:send` for one registration token, or `nil`
    /// when the data is over FCM's limit. No `collapse_key`: FCM throttles collapsible messages per
    /// device, and the version already lets the app keep only the newest.
    public func requestBody(registrationToken: String) -> [UInt8]? {
        guard dataBytes <= Self.maximumDataBytes else { return nil }
        var writer = JSONWriter(capacity: 256 + (attributes.count + contentState.count) * 2)
        writer.beginObject()
        writer.key("message")
        writer.beginObject()
        writer.key("android")
        writer.beginObject()
        writer.member("priority", highPriority ? "HIGH" : "NORMAL")
        writer.member("ttl", "\(max(0, Int64(timeToLive.rounded())))s")
        writer.endObject()
        writer.key("data")
        writer.beginObject()
        writer.member("attributes", String(decoding: attributes, as: UTF8.self))
        if let dismissAt { writer.member("dismissAt", String(Int64(dismissAt.timeIntervalSince1970.rounded()))) }
        writer.member("event", event.rawValue)
        writer.member("state", String(decoding: contentState, as: UTF8.self))
        writer.member("version", String(version))
        writer.endObject()
        writer.member("token", registrationToken)
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }
}
