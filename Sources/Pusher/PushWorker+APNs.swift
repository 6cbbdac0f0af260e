internal import Foundation
internal import Projection
internal import Storage
internal import Telemetry

extension PushWorker {
    /// Sends a batch's iPhone pushes to APNs, each with its app's provider token, and returns what
    /// to store for each.
    /// - Throws: when a provider token cannot be made (the rows come back when their leases run out).
    func sendToApple(_ planned: [Planned], now: Date) async throws -> [PushCompletion] {
        guard !planned.isEmpty else { return [] }
        var completions: [PushCompletion] = []
        // One provider token per app key in the batch, minted or reused by its cache.
        var providers: [String: ProviderToken] = [:]
        for bundleID in Set(planned.map(\.bundleID)) {
            if let cache = appTokens[bundleID] ?? tokens { providers[bundleID] = try await cache.token(now: now) }
        }
        let requests = planned.map { entry in
            APNsRequest(
                baseURL: entry.environment == .development
                    ? configuration.developmentURL : configuration.productionURL,
                deviceToken: entry.token, topic: entry.push.headers.topic, priority: entry.push.headers.priority,
                expiration: entry.push.headers.expiration, collapseID: entry.push.headers.collapseID,
                payload: entry.push.payload, providerToken: providers[entry.bundleID]?.compact ?? ""
            )
        }
        let sentAt = Date()
        let responses = sender.send(requests)
        // A delivery anywhere in the batch confirms its environment before any answer is classified:
        // one BadDeviceToken among successful pushes is a dead token, whatever its place in the batch.
        for (entry, response) in zip(planned, responses) where response.status == 200 {
            pauses.delivered(entry.environment)
        }
        var expired = Set<String>()
        for (entry, response) in zip(planned, responses) {
            let (completion, refresh) = complete(entry, with: response, now: now, sentAt: sentAt)
            completions.append(completion)
            if refresh { expired.insert(entry.bundleID) }
        }
        for bundleID in expired {
            if let cache = appTokens[bundleID] ?? tokens, let provider = providers[bundleID] {
                _ = try await cache.replaceExpired(provider, now: now)
            }
        }
        return completions
    }

    /// What to store for one answered push; the flag asks for a new provider token.
    /// `sentAt` is when the batch's requests went out: the push log's `attemptedAt`.
    private func complete(_ entry: Planned, with response: APNsResponse, now: Date, sentAt: Date) -> (
        PushCompletion, Bool
    ) {
        let item = entry.item
        let event = entry.push.event.rawValue
        let attempt = PushAttempt(
            orderID: item.orderID, targetID: Self.targetLabel(item.target), event: event,
            priority: entry.push.headers.priority, httpStatus: response.status,
            reason: response.reason?.description ?? response.transportError, apnsID: response.apnsID,
            latencyMilliseconds: Int(response.latencySeconds * 1000), attemptedAt: sentAt, requestID: item.requestID,
            contentState: String(decoding: planner.projector.encode(entry.push.contentState), as: UTF8.self)
        )
        metrics.apnsRoundTrip.observe(response.latencySeconds)
        let action = PushResultClassifier.action(
            status: response.status, reason: response.reason, timestamp: response.timestamp,
            environmentConfirmed: pauses.isConfirmed(entry.environment)
        )
        let reason = response.reason?.description ?? response.transportError ?? "status \(response.status ?? 0)"
        recordAnswer(
            entry, accepted: action == .delivered,
            failure: response.reason?.description
                ?? (response.status == nil ? "transport" : "status_\(response.status ?? 0)")
        ) {
            [
                "request.id": .string(item.requestID ?? "-"), "order.id": .string(item.orderID),
                "push.target": .string(Self.targetLabel(item.target)), "push.event": .string(event),
                "apns.status": .int(response.status ?? 0), "apns.reason": .string(reason),
                "device.token.prefix": .string(String(entry.token.prefix(8))),
            ]
        }
        var completion = PushCompletion(item: item, outcome: .sent, attempt: attempt)
        var refresh = false
        switch action {
        case .delivered:
            completion = accepted(entry, attempt: attempt)
        case .dropToken(let registeredBefore):
            completion = droppingToken(entry, attempt: attempt, reason: reason, registeredBefore: registeredBefore)
        case .deadLetter:
            completion.outcome = .dead(reason: reason)
            if response.reason == .known(.badDeviceToken), pauses.badTokenWhileUnconfirmed(entry.environment) {
                // Every token refused and none delivered: the environment or key is wrong, not the tokens.
                _ = pause(entry.environment, reason: reason, now: now)
            }
        case .refreshTokenAndRetry:
            refresh = true
            completion.outcome = retryOutcome(item, reason: reason, now: now)
        case .retry:
            completion.outcome = retryOutcome(item, reason: reason, now: now)
        case .pauseEnvironment:
            completion.outcome = waitOutcome(
                item, until: pause(entry.environment, reason: reason, now: now), reason: reason, now: now)
        }
        countResult(completion, of: entry)
        return (completion, refresh)
    }

    /// Pauses an environment after APNs refused our configuration; returns when sending resumes.
    ///
    /// Sending on would only burn the queue into failures: the rows wait (their retry deadline still
    /// runs, after which they become dead letters an admin can replay once the setting is fixed).
    private func pause(_ environment: PushEnvironment, reason: String, now: Date) -> Date {
        let (until, started) = pauses.pause(
            environment, reason: reason, now: now, first: configuration.firstPause, maximum: configuration.maximumPause)
        guard let length = started else { return until }
        metrics.environmentPauses.increment([environment.rawValue, reason])
        logger.error(
            "apns.environment_paused",
            [
                "apns.environment": .string(environment.rawValue), "apns.reason": .string(reason),
                "pause.seconds": .number(length),
                "note": "APNs refused the provider token, key or topic: check the APNs settings; pushes wait",
            ])
        return until
    }
}
