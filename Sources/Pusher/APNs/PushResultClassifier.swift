public import Foundation

/// What the pusher does with one APNs answer.
public enum PushAction: Hashable, Sendable {
    /// Accepted: the outbox row is done.
    case delivered
    /// Try the same push again later (throttling, APNs trouble, transport failure); `reconnect`
    /// asks for a fresh connection first.
    case retry(reconnect: Bool)
    /// The provider token was refused as expired: re-mint (within the 20-minute rule) and retry.
    case refreshTokenAndRetry
    /// The token is dead: delete it and stop its pending rows. For a 410, only if it was registered
    /// before `registeredBefore` (the time APNs says it stopped being valid).
    case dropToken(registeredBefore: Date?)
    /// Our credentials, topic or environment are wrong: pause this environment, keep the rows, alert.
    case pauseEnvironment
    /// This push can never succeed as built: keep it as a dead letter.
    case deadLetter
}

/// Maps an APNs answer to an action, following the reason table of Apple's documentation.
public enum PushResultClassifier {
    /// - Parameters:
    ///   - status: the HTTP status, `nil` when no answer came (connection refused, reset, timeout).
    ///   - reason: the `reason` of the error body, if any.
    ///   - timestamp: the `timestamp` of a 410 body (milliseconds since 1970 in the wire format).
    ///   - environmentConfirmed: whether this key and environment already delivered to other tokens;
    ///     `BadDeviceToken` deletes a token only then (a sandbox token sent to production gets it too).
    public static func action(status: Int?, reason: APNsReason?, timestamp: Date?, environmentConfirmed: Bool)
        -> PushAction
    {
        guard let status else { return .retry(reconnect: true) }
        if status == 200 { return .delivered }
        if case .known(let known)? = reason {
            switch known {
            case .unregistered, .expiredToken: return .dropToken(registeredBefore: timestamp)
            case .deviceTokenNotForTopic: return .dropToken(registeredBefore: nil)
            case .badDeviceToken: return environmentConfirmed ? .dropToken(registeredBefore: nil) : .deadLetter
            case .expiredProviderToken: return .refreshTokenAndRetry
            case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable:
                return .retry(reconnect: false)
            case .idleTimeout, .shutdown, .unrelatedKeyIdInToken: return .retry(reconnect: true)
            case .badTopic, .missingTopic, .topicDisallowed, .badCertificate, .badCertificateEnvironment, .forbidden,
                .invalidProviderToken, .missingProviderToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken:
                return .pauseEnvironment
            case .badCollapseId, .badExpirationDate, .badMessageId, .badPriority, .duplicateHeaders, .invalidPushType,
                .missingDeviceToken, .payloadEmpty, .badPath, .methodNotAllowed, .payloadTooLarge:
                return .deadLetter
            }
        }
        switch status {
        case 410: return .dropToken(registeredBefore: timestamp)
        case 429, 500...599: return .retry(reconnect: false)
        case 403: return .pauseEnvironment
        default: return .deadLetter
        }
    }
}

/// Exponential backoff with full jitter, a cap, and an overall deadline after which a row is dead.
public struct RetryPolicy: Sendable, Hashable {
    public var baseDelay: TimeInterval
    public var maximumDelay: TimeInterval
    /// How long after its first attempt a push is given up.
    public var deadline: TimeInterval

    /// Defaults: 1 s base, 15 minutes cap (Apple suggests waiting that long after 5xx), 4-hour deadline.
    public init(baseDelay: TimeInterval = 1, maximumDelay: TimeInterval = 15 * 60, deadline: TimeInterval = 4 * 3600) {
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.deadline = deadline
    }

    /// The wait before attempt `attempt + 1`, given a uniform random `jitter` in 0...1.
    public func delay(afterAttempt attempt: Int, jitter: Double) -> TimeInterval {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(maximumDelay, baseDelay * pow(2, Double(exponent)))
        return ceiling * min(max(jitter, 0), 1)
    }

    /// Whether a push first tried at `firstAttempt` should be given up at `now`.
    public func isExhausted(firstAttempt: Date, now: Date) -> Bool {
        now.timeIntervalSince(firstAttempt) >= deadline
    }
}
