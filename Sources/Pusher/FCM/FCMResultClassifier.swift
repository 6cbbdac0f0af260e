/// What the pusher does with one FCM answer.
public enum FCMAction: Hashable, Sendable {
    /// Accepted: the outbox row is done.
    case delivered
    /// Try again later; FCM's `Retry-After` when it gave one, else the pusher's backoff.
    case retry(after: Int?)
    /// The access token was refused: fetch a new one and try again.
    case refreshTokenAndRetry
    /// The registration token is dead or malformed: delete the device and stop its pending rows.
    case dropToken
    /// The project's credentials or sender are wrong: pause this project, keep the rows, alert.
    case pauseProject
    /// This message can never succeed as built: keep it as a dead letter.
    case deadLetter
}

/// Maps an FCM answer to an action, following the error table of FCM's HTTP v1 documentation.
public enum FCMResultClassifier {
    public static func action(for response: FCMResponse) -> FCMAction {
        guard let status = response.status else { return .retry(after: nil) }
        if status == 200 { return .delivered }
        switch response.errorCode {
        case "UNREGISTERED": return .dropToken
        case "INVALID_ARGUMENT":
            // The device's token, or our message: only the first is the device's fault.
            return response.invalidField == "message.token" ? .dropToken : .deadLetter
        case "SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED": return .pauseProject
        case "UNAUTHENTICATED": return .refreshTokenAndRetry
        case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED":
            return .retry(after: response.retryAfter)
        default: break
        }
        switch status {
        case 401: return .refreshTokenAndRetry
        case 403: return .pauseProject
        case 404: return .dropToken
        case 429, 500...599: return .retry(after: response.retryAfter)
        default: return .deadLetter
        }
    }
}
