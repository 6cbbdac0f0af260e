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
        /// 0…1, for the progress bar; while delivering with a known distance it moves from 0.75
        /// towards 0.99 as the rider comes closer.
        public var progress: Double
        /// A short label in the order's language, at most 24 characters.
        public var statusText: String
        /// Rounded to the minute; while delivering with a known distance, from the rider's speed.
        public var estimatedArrival: Date
        /// The rider's first name, once a rider is assigned.
        public var riderName: String?
        /// Metres left to the door as the crow flies, a multiple of 100, while delivering; `nil`
        /// when unknown and once `arriving` (never anything finer: it says where a person is).
        public var remainingDistance: Int?
        /// The rider is a few hundred metres away or less: show "arriving", not a distance.
        public var arriving: Bool
        /// When the order was delivered or cancelled, on the final state only. A widget shows this
        /// time, not `estimatedArrival` (the promise the merchant made), and stops any countdown.
        public var endedAt: Date?

        public init(
            status: String, stage: Int, progress: Double, statusText: String, estimatedArrival: Date,
            riderName: String?, remainingDistance: Int? = nil, arriving: Bool = false, endedAt: Date? = nil
        ) {
            self.status = status
            self.stage = stage
            self.progress = progress
            self.statusText = statusText
            self.estimatedArrival = estimatedArrival
            self.riderName = riderName
            self.remainingDistance = remainingDistance
            self.arriving = arriving
            self.endedAt = endedAt
        }

        private enum CodingKeys: String, CodingKey {
            case status, stage, progress, statusText, estimatedArrival, riderName, remainingDistance, arriving
            case endedAt
        }

        /// `arriving` is sent only when true, `remainingDistance` only when known and `endedAt` only
        /// at the end, so that the pushes of orders without a ride stay as small as before and an
        /// app built before these fields, or a server that does not send them, decodes as it did.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            status = try container.decode(String.self, forKey: .status)
            stage = try container.decode(Int.self, forKey: .stage)
            progress = try container.decode(Double.self, forKey: .progress)
            statusText = try container.decode(String.self, forKey: .statusText)
            estimatedArrival = try container.decode(Date.self, forKey: .estimatedArrival)
            riderName = try container.decodeIfPresent(String.self, forKey: .riderName)
            remainingDistance = try container.decodeIfPresent(Int.self, forKey: .remainingDistance)
            arriving = try container.decodeIfPresent(Bool.self, forKey: .arriving) ?? false
            endedAt = try container.decodeIfPresent(Date.self, forKey: .endedAt)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(status, forKey: .status)
            try container.encode(stage, forKey: .stage)
            try container.encode(progress, forKey: .progress)
            try container.encode(statusText, forKey: .statusText)
            try container.encode(estimatedArrival, forKey: .estimatedArrival)
            try container.encodeIfPresent(riderName, forKey: .riderName)
            try container.encodeIfPresent(remainingDistance, forKey: .remainingDistance)
            if arriving { try container.encode(true, forKey: .arriving) }
            try container.encodeIfPresent(endedAt, forKey: .endedAt)
        }

        /// The status as a case this version knows, `nil` for one a newer server sent.
        public var knownStatus: DeliveryStatus? { DeliveryStatus(rawValue: status) }
    }
}

/// The stages of a delivery, in order; `cancelled` may end any stage before `delivered`.
///
/// The server's domain uses this type itself (as `OrderStatus`), so the app and the server cannot
/// disagree on a status. The raw values are the strings of the HTTP API and of `ContentState.status`,
/// so they never change.
public enum DeliveryStatus: String, CaseIterable, Codable, Hashable, Sendable {
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
