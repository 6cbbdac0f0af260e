/// The `reason` of an APNs error response, decoded without losing unknown values.
///
/// A reason APNs adds later arrives as `.unknown`, is logged as it came and handled by its status.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    /// Every reason of Apple's device-push table.
    public enum Known: String, Sendable, CaseIterable {
        case badCollapseId = "BadCollapseId"
        case badDeviceToken = "BadDeviceToken"
        case badExpirationDate = "BadExpirationDate"
        case badMessageId = "BadMessageId"
        case badPriority = "BadPriority"
        case badTopic = "BadTopic"
        case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
        case duplicateHeaders = "DuplicateHeaders"
        case idleTimeout = "IdleTimeout"
        case invalidPushType = "InvalidPushType"
        case missingDeviceToken = "MissingDeviceToken"
        case missingTopic = "MissingTopic"
        case payloadEmpty = "PayloadEmpty"
        case topicDisallowed = "TopicDisallowed"
        case badCertificate = "BadCertificate"
        case badCertificateEnvironment = "BadCertificateEnvironment"
        case expiredProviderToken = "ExpiredProviderToken"
        case forbidden = "Forbidden"
        case invalidProviderToken = "InvalidProviderToken"
        case missingProviderToken = "MissingProviderToken"
        case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
        /// Apple's documented spelling.
        case badEnvironmentKeyIdInToken = "BadEnvironmentKeyIdInToken"
        /// The spelling APNs has been observed to return.
        case badEnvironmentKeyInToken = "BadEnvironmentKeyInToken"
        case badPath = "BadPath"
        case methodNotAllowed = "MethodNotAllowed"
        case expiredToken = "ExpiredToken"
        case unregistered = "Unregistered"
        case payloadTooLarge = "PayloadTooLarge"
        case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
        case tooManyRequests = "TooManyRequests"
        case internalServerError = "InternalServerError"
        case serviceUnavailable = "ServiceUnavailable"
        case shutdown = "Shutdown"
    }

    case known(Known)
    case unknown(String)

    public init(_ text: String) {
        self = Known(rawValue: text).map(APNsReason.known) ?? .unknown(text)
    }

    public var description: String {
        switch self {
        case .known(let reason): reason.rawValue
        case .unknown(let text): text
        }
    }
}
