internal import Foundation
internal import Projection
internal import Storage
internal import Telemetry

/// A batch's Android messages, built and ready to send, and the rows that never got that far.
struct AndroidBatch {
    var finished: [PushCompletion] = []
    var sending: [(entry: PushWorker.Planned, update: AndroidLiveUpdate)] = []
    var requests: [FCMRequest] = []
    var accessToken: FCMAccessToken?
}

/// One batch of FCM messages on the wire on a thread of its own while the worker's thread sends the
/// batch's APNs pushes: a batch with both platforms waits for the slower service, not for both in turn.
final class FCMFlight: @unchecked Sendable {
    // Unchecked: `sender` is the worker's (not `Sendable`), lent to the flight's queue from `init`
    // until `wait` returns, and the worker does not touch it meanwhile; `responses` is written
    // before `done` is signalled and read only after it was waited for. The semaphore orders both.
    private let sender: any FCMSender
    private var responses: [FCMResponse] = []
    private let done = DispatchSemaphore(value: 0)

    init(_ requests: [FCMRequest], sender: any FCMSender, on queue: DispatchQueue) {
        self.sender = sender
        queue.async { [self] in
            responses = self.sender.send(requests)
            done.signal()
        }
    }

    /// The answers, in the order of the requests.
    func wait() -> [FCMResponse] {
        done.wait()
        return responses
    }
}

extension PushWorker {
    /// Builds a batch's Android messages, with one access token: each row's message from the same
    /// planned push its iPhone twin gets, the same public state as a data-only message (see
    /// `androidUpdate`). Rows that cannot be sent (no FCM, no token, too large) are finished here.
    func prepareAndroid(_ entries: [Planned], now: Date) -> AndroidBatch {
        var batch = AndroidBatch()
        guard let fcm else {
            batch.finished = entries.map { entry in
                let completion = PushCompletion(item: entry.item, outcome: .dead(reason: "fcm_not_configured"))
                countResult(completion, of: entry)
                return completion
            }
            return batch
        }
        let accessToken: FCMAccessToken
        do {
            accessToken = try fcm.tokens.token(now: now)
        } catch {
            // The account's fault (or its endpoint's), not the devices': the rows wait.
            batch.finished = entries.map { entry in
                let reason = "access_token: " + error.description
                let completion = PushCompletion(
                    item: entry.item,
                    outcome: error.isTransient
                        ? retryOutcome(entry.item, reason: reason, now: now)
                        : waitOutcome(
                            entry.item, until: pauseProject(entry.bundleID, reason: "access_token_refused", now: now),
                            reason: reason, now: now))
                countResult(completion, of: entry)
                return completion
            }
            return batch
        }
        batch.accessToken = accessToken
        for entry in entries {
            let update = androidUpdate(for: entry, now: now)
            guard let body = update.requestBody(registrationToken: entry.token) else {
                logger.error("push.payload_too_large", ["order.id": .string(entry.item.orderID)])
                let completion = PushCompletion(item: entry.item, outcome: .dead(reason: "payload_too_large"))
                countResult(completion, of: entry)
                batch.finished.append(completion)
                continue
            }
            batch.sending.append((entry, update))
            batch.requests.append(
                FCMRequest(
                    baseURL: fcm.baseURL, projectID: entry.bundleID, body: body, accessToken: accessToken.value))
        }
        return batch
    }

    /// What to store for each row of a sent Android batch; drops the access token FCM refused.
    func finishAndroid(_ batch: AndroidBatch, responses: [FCMResponse], now: Date, sentAt: Date) -> [PushCompletion] {
        var completions = batch.finished
        var refused = false
        for ((entry, update), response) in zip(batch.sending, responses) {
            let action = FCMResultClassifier.action(for: response)
            if action == .refreshTokenAndRetry { refused = true }
            completions.append(
                complete(entry, update: update, with: response, action: action, now: now, sentAt: sentAt))
        }
        if refused, let token = batch.accessToken { fcm?.tokens.discard(token) }
        return completions
    }

    /// The Android message of a planned push: the same public state; the push's timestamp (which
    /// only grows per activity) as the version; high priority only for what the customer must see
    /// now; kept by FCM until the push's own expiry.
    func androidUpdate(for entry: Planned, now: Date) -> AndroidLiveUpdate {
        let ending = entry.push.event == .end
        return AndroidLiveUpdate(
            attributes: entry.attributes, contentState: planner.projector.encode(entry.push.contentState),
            version: Int64(entry.push.timestamp.timeIntervalSince1970.rounded(.down)),
            event: ending ? .end : .update,
            dismissAt: ending ? now.addingTimeInterval(configuration.projection.dismissalDelay) : nil,
            highPriority: entry.newStatus, timeToLive: max(0, entry.push.headers.expiration.timeIntervalSince(now)))
    }

    /// What to store for one answered FCM message.
    private func complete(
        _ entry: Planned, update: AndroidLiveUpdate, with response: FCMResponse, action: FCMAction, now: Date,
        sentAt: Date
    ) -> PushCompletion {
        let item = entry.item
        let reason = response.errorCode ?? response.transportError ?? "status \(response.status ?? 0)"
        let attempt = PushAttempt(
            orderID: item.orderID, targetID: Self.targetLabel(item.target), event: entry.push.event.rawValue,
            priority: update.highPriority ? 10 : 5, httpStatus: response.status,
            reason: response.errorCode ?? response.transportError, apnsID: response.messageName,
            latencyMilliseconds: Int(response.latencySeconds * 1000), attemptedAt: sentAt, requestID: item.requestID,
            contentState: String(decoding: update.contentState, as: UTF8.self), platform: .android)
        metrics.fcmRoundTrip.observe(response.latencySeconds)
        recordAnswer(
            entry, accepted: action == .delivered,
            failure: response.errorCode ?? (response.status == nil ? "transport" : "status_\(response.status ?? 0)")
        ) {
            [
                "request.id": .string(item.requestID ?? "-"), "order.id": .string(item.orderID),
                "push.target": .string(Self.targetLabel(item.target)), "push.event": .string(entry.push.event.rawValue),
                "fcm.status": .int(response.status ?? 0), "fcm.reason": .string(reason),
                "device.token.prefix": .string(String(entry.token.prefix(8))),
            ]
        }
        var completion = PushCompletion(item: item, outcome: .sent, attempt: attempt)
        switch action {
        case .delivered:
            projectPauses.delivered(entry.bundleID)
            completion = accepted(entry, attempt: attempt)
        case .dropToken:
            // FCM gives no time the token died: one registered after this message went out is kept.
            completion = droppingToken(entry, attempt: attempt, reason: reason, registeredBefore: sentAt)
        case .deadLetter:
            completion.outcome = .dead(reason: reason)
        case .refreshTokenAndRetry:
            completion.outcome = retryOutcome(item, reason: reason, now: now)
        case .retry(let after):
            completion.outcome =
                after.map {
                    waitOutcome(item, until: now.addingTimeInterval(TimeInterval($0)), reason: reason, now: now)
                }
                ?? retryOutcome(item, reason: reason, now: now)
        case .pauseProject:
            completion.outcome = waitOutcome(
                item, until: pauseProject(entry.bundleID, reason: reason, now: now), reason: reason, now: now)
        }
        countResult(completion, of: entry)
        return completion
    }

    /// Pauses a Firebase project after FCM refused our credentials or sender; returns when sending resumes.
    private func pauseProject(_ project: String, reason: String, now: Date) -> Date {
        let (until, started) = projectPauses.pause(
            project, reason: reason, now: now, first: configuration.firstPause, maximum: configuration.maximumPause)
        guard let length = started else { return until }
        metrics.projectPauses.increment([project, reason])
        logger.error(
            "fcm.project_paused",
            [
                "fcm.project": .string(project), "fcm.reason": .string(reason), "pause.seconds": .number(length),
                "note": "FCM refused the service account or sender: check the FCM settings; pushes wait",
            ])
        return until
    }
}
