internal import Foundation
internal import Projection
internal import Storage
internal import Telemetry

extension PushWorker {
    /// Sends a batch's Android messages through FCM, with one access token, and returns what to
    /// store for each. Each row's message is built from the same planned push its iPhone twin gets:
    /// the same public state, as a data-only message (see `androidUpdate`).
    func sendToAndroid(_ entries: [Planned], now: Date) -> [PushCompletion] {
        guard let fcm else {
            return entries.map { entry in
                let completion = PushCompletion(item: entry.item, outcome: .dead(reason: "fcm_not_configured"))
                countResult(completion, of: entry)
                return completion
            }
        }
        let accessToken: FCMAccessToken
        do {
            accessToken = try fcm.tokens.token(now: now)
        } catch {
            // The account's fault (or its endpoint's), not the devices': the rows wait.
            return entries.map { entry in
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
        }
        var completions: [PushCompletion] = []
        var sending: [(entry: Planned, update: AndroidLiveUpdate)] = []
        var requests: [FCMRequest] = []
        for entry in entries {
            let update = androidUpdate(for: entry, now: now)
            guard let body = update.requestBody(registrationToken: entry.token) else {
                logger.error("push.payload_too_large", ["order.id": .string(entry.item.orderID)])
                let completion = PushCompletion(item: entry.item, outcome: .dead(reason: "payload_too_large"))
                countResult(completion, of: entry)
                completions.append(completion)
                continue
            }
            sending.append((entry, update))
            requests.append(
                FCMRequest(
                    baseURL: fcm.baseURL, projectID: entry.bundleID, body: body, accessToken: accessToken.value))
        }
        guard !requests.isEmpty else { return completions }
        let sentAt = Date()
        let responses = fcm.sender.send(requests)
        var refused = false
        for ((entry, update), response) in zip(sending, responses) {
            let action = FCMResultClassifier.action(for: response)
            if action == .refreshTokenAndRetry { refused = true }
            completions.append(
                complete(entry, update: update, with: response, action: action, now: now, sentAt: sentAt))
        }
        if refused { fcm.tokens.discard(accessToken) }
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
            failure: response.errorCode ?? (response.status == nil ? "transport" : "status_\(response.status ?? 0)"),
            fields: [
                "request.id": .string(item.requestID ?? "-"), "order.id": .string(item.orderID),
                "push.target": .string(Self.targetLabel(item.target)), "push.event": .string(entry.push.event.rawValue),
                "fcm.status": .int(response.status ?? 0), "fcm.reason": .string(reason),
                "device.token.prefix": .string(String(entry.token.prefix(8))),
            ])
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
