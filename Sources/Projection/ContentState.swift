public import FoundationEssentials

/// The dynamic part of the Live Activity, field for field as the iOS app declares
/// `DeliveryAttributes.ContentState`; nothing else of an order is ever pushed.
public struct ContentState: Sendable, Hashable {
    /// `placed` … `delivered` or `cancelled`.
    public var status: String
    /// 0…4; a cancelled order keeps the stage it was cancelled at.
    public var stage: Int
    /// 0…1, for the progress bar.
    public var progress: Double
    /// A short label in the order's language, at most 24 characters.
    public var statusText: String
    public var estimatedArrival: Date
    /// The rider's first name, scrubbed; `nil` until a rider is assigned.
    public var riderName: String?

    public init(
        status: String, stage: Int, progress: Double, statusText: String, estimatedArrival: Date, riderName: String?
    ) {
        self.status = status
        self.stage = stage
        self.progress = progress
        self.statusText = statusText
        self.estimatedArrival = estimatedArrival
        self.riderName = riderName
    }
}

/// The static part of the Live Activity, sent once when it starts.
public struct ActivityAttributes: Sendable, Hashable {
    /// The merchant's short display number, not deliveryd's internal id.
    public var orderNumber: String
    public var merchantName: String

    public init(orderNumber: String, merchantName: String) {
        self.orderNumber = orderNumber
        self.merchantName = merchantName
    }
}
