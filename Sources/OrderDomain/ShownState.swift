public import FoundationEssentials

/// What a Live Activity shows of its order, as far as the server knows: the state of the last push
/// APNs or FCM accepted for it, or, before any, what the app said it shows when it registered its
/// token. The pusher compares the order's next state with it, so that nothing already shown is sent
/// again and what differs is sent at once.
public struct ShownState: Sendable, Hashable {
    public let status: OrderStatus
    /// `LiveActivityProjector.fingerprint` of the state shown.
    public let fingerprint: String
    /// The `aps.timestamp` of the push that showed it; `nil` when the app reported it. The next push
    /// must be later, or iOS drops it as stale.
    public let timestamp: Date?

    public init(status: OrderStatus, fingerprint: String, timestamp: Date? = nil) {
        self.status = status
        self.fingerprint = fingerprint
        self.timestamp = timestamp
    }
}
