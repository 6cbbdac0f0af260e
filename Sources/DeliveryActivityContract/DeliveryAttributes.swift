#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// The Live Activity of one delivery order, exactly as the iOS app declares it and deliveryd pushes it.
///
/// The app's widget extension and the server share this one type, so a renamed or retyped field breaks
/// a build or a test here instead of a phone. ActivityKit decodes pushes with a default `JSONDecoder`,
/// so every field uses the default strategies: `Date` is seconds since 2001-01-01, keys are the
/// property names.
///
/// - Important: `orderId` is what an app woken by a `start` push needs to register the activity's
///   update token; no secret ever travels in a push.
public struct DeliveryAttributes: Codable, Hashable, Sendable {
    /// deliveryd's id of the order (`o_…`): the path of every call about it.
    public var orderId: String
    /// The merchant's short display number, not deliveryd's id.
    public var orderNumber: String
    public var merchantName: String

    public init(orderId: String, orderNumber: String, merchantName: String) {
        self.orderId = orderId
        self.orderNumber = orderNumber
        self.merchantName = merchantName
    }

    /// What every update carries; nothing else of an order ever leaves the server.
    ///
    /// - Note: `status` stays a `String` on the wire so that an app built today still decodes a
    ///   status a later server adds; `knownStatus` gives the cases this version knows.
    public struct ContentState: Codable, Hashable, Sendable {
        /// `placed`, `preparing`, `pickup`, `delivering`, `delivered` or `cancelled`.
        public var status: String
        /// 0…4; a cancelled order keeps the stage it was cancelled at.
        public var stage: Int
        /// 0…1, for the progress bar.
        public var progress: Double
        /// A short label in the order's language, at most 24 characters.
        public var statusText: String
        /// Rounded to the minute.
        public var estimatedArrival: Date
        /// The rider's first name, once a rider is assigned.
        public var riderName: String?

        public init(
            status: String, stage: Int, progress: Double, statusText: String, estimatedArrival: Date,
            riderName: String?
        ) {
            self.status = status
            self.stage = stage
            self.progress = progress
            self.statusText = statusText
            self.estimatedArrival = estimatedArrival
            self.riderName = riderName
        }

        /// The status as a case this version knows, `nil` for one a newer server sent.
        public var knownStatus: DeliveryStatus? { DeliveryStatus(rawValue: status) }
    }
}

/// The stages of a delivery, in order; `cancelled` may end any stage before `delivered`.
public enum DeliveryStatus: String, CaseIterable, Sendable {
    case placed
    case preparing
    case pickup
    case delivering
    case delivered
    case cancelled

    /// Whether the activity has ended with this status.
    public var isFinal: Bool { self == .delivered || self == .cancelled }
}

#if canImport(ActivityKit)
    import ActivityKit

    extension DeliveryAttributes: ActivityAttributes {}
#endif
