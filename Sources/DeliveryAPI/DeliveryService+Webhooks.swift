import Cryptography
import FoundationEssentials
import HTTPServer
import OrderDomain
import Storage
import Webhooks

/// Webhook endpoints, managed by their merchant's key (and by admin keys, for any merchant).
extension DeliveryService {
    /// Endpoints one merchant may have.
    static let webhookEndpointLimit = 20
    /// Events one replay looks at: a longer range is replayed in several requests (`nextSince`),
    /// so that one request cannot hold the database's writer for long.
    static let replayLimit = 10_000
    /// The longest the previous secret may keep signing after a rotation.
    static let longestSecretGrace: TimeInterval = 7 * 86_400

    /// `POST /v1/webhooks`: `{url, eventTypes?, description?, enabled?, merchantId? (admin)}` → the
    /// endpoint with its signing secret, shown this once.
    func createWebhook(_ call: Call) throws -> HTTPResponse {
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let merchantID = try webhookMerchant(call, named: body, &reader)
        let url = reader.require(webhookURL(body, &reader), "url")
        let types = webhookEventTypes(body, &reader) ?? []
        let description = webhookDescription(body, &reader) ?? ""
        let enabled = webhookEnabled(body, &reader) ?? true
        try reader.finish()
        guard let merchantID, let url else { throw APIError.internalError() }
        if try store.webhookEndpoints(merchantID: merchantID).count >= Self.webhookEndpointLimit {
            throw APIError.conflict("a merchant may have at most \(Self.webhookEndpointLimit) webhook endpoints")
        }
        let id = "ep_" + SecureRandom.hexToken(byteCount: 12)
        let secret = WebhookSecret.generate()
        let endpoint = WebhookEndpointRecord(
            id: id, merchantID: merchantID, url: url, description: description, eventTypes: types, enabled: enabled,
            secretSealed: try secret.sealed(with: sealingKey, endpointID: id), now: call.now)
        try store.createWebhookEndpoint(endpoint)
        guard case .object(var view) = webhookView(endpoint, counts: WebhookQueueCounts()) else {
            throw APIError.internalError()
        }
        view["secret"] = .string(secret.text)
        return json(201, .object(view))
    }

    /// `GET /v1/webhooks[?merchantId=]`: a merchant's endpoints (an admin's: every merchant's, or one's).
    func listWebhooks(_ call: Call) throws -> HTTPResponse {
        let merchantID: String?
        switch call.caller {
        case .staff(.merchant(let own), _): merchantID = own
        case .staff(.admin, _):
            merchantID = (call.request.query ?? "").split(separator: "&")
                .first { $0.hasPrefix("merchantId=") }.map { String($0.dropFirst("merchantId=".count)) }
        default: throw APIError.forbidden("webhooks are managed with a merchant or admin key")
        }
        let endpoints = try store.webhookEndpoints(merchantID: merchantID)
        return json(
            200,
            .object([
                "webhooks": .array(
                    try endpoints.map { webhookView($0, counts: try store.webhookQueueCounts(endpointID: $0.id)) })
            ]))
    }

    /// `GET /v1/webhooks/{id}`: the endpoint and its health.
    func showWebhook(_ call: Call) throws -> HTTPResponse {
        let endpoint = try ownedWebhook(call)
        return json(200, webhookView(endpoint, counts: try store.webhookQueueCounts(endpointID: endpoint.id)))
    }

    /// `PATCH /v1/webhooks/{id}`: `{url?, eventTypes?, description?, enabled?}`. Enabling an endpoint
    /// clears what disabled it (its failures and pause); what happened meanwhile can be replayed.
    func updateWebhook(_ call: Call) throws -> HTTPResponse {
        var endpoint = try ownedWebhook(call)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let url = webhookURL(body, &reader)
        let types = webhookEventTypes(body, &reader)
        let description = webhookDescription(body, &reader)
        let enabled = webhookEnabled(body, &reader)
        try reader.finish()
        if let url { endpoint.url = url }
        if let types { endpoint.eventTypes = types }
        if let description { endpoint.description = description }
        if let enabled {
            if enabled && !endpoint.enabled {
                endpoint.disabledReason = nil
                endpoint.failingSince = nil
                endpoint.pausedUntil = nil
            }
            endpoint.enabled = enabled
        }
        endpoint.updatedAt = call.now
        guard try store.updateWebhookEndpoint(endpoint) else { throw APIError.notFound("no such webhook endpoint") }
        return json(200, webhookView(endpoint, counts: try store.webhookQueueCounts(endpointID: endpoint.id)))
    }

    /// `DELETE /v1/webhooks/{id}`: the endpoint, its queued deliveries and its log.
    func deleteWebhook(_ call: Call) throws -> HTTPResponse {
        let endpoint = try ownedWebhook(call)
        guard try store.deleteWebhookEndpoint(id: endpoint.id) else {
            throw APIError.notFound("no such webhook endpoint")
        }
        return HTTPResponse(status: 204)
    }

    /// `POST /v1/webhooks/{id}/rotate-secret`: `{graceSeconds?}` (default a day, at most 7) → the new
    /// secret, shown this once. Until the grace period ends the previous secret signs too, so a
    /// receiver can switch without losing a message.
    func rotateWebhookSecret(_ call: Call) throws -> HTTPResponse {
        var endpoint = try ownedWebhook(call)
        let body = call.request.body.isEmpty ? [:] : try jsonObject(call.request)
        var reader = FieldReader()
        let grace = reader.number(body, "graceSeconds") ?? 86_400
        if !(0...Self.longestSecretGrace).contains(grace) {
            reader.fail("graceSeconds", "must be 0 to \(Int(Self.longestSecretGrace))")
        }
        try reader.finish()
        let secret = WebhookSecret.generate()
        endpoint.previousSecretSealed = grace > 0 ? endpoint.secretSealed : nil
        endpoint.previousSecretExpiresAt = grace > 0 ? call.now.addingTimeInterval(grace) : nil
        endpoint.secretSealed = try secret.sealed(with: sealingKey, endpointID: endpoint.id)
        endpoint.updatedAt = call.now
        guard try store.updateWebhookEndpoint(endpoint) else { throw APIError.notFound("no such webhook endpoint") }
        return json(
            200,
            .object([
                "id": .string(endpoint.id), "secret": .string(secret.text),
                "previousSecretExpiresAt": .time(endpoint.previousSecretExpiresAt),
            ]))
    }

    /// `GET /v1/webhooks/{id}/attempts?limit=N`: the delivery log, newest first.
    func listWebhookAttempts(_ call: Call) throws -> HTTPResponse {
        let endpoint = try ownedWebhook(call)
        var limit = 100
        for pair in (call.request.query ?? "").split(separator: "&") where pair.hasPrefix("limit=") {
            guard let value = Int(pair.dropFirst(6)), (1...1000).contains(value) else {
                throw APIError.validationFailed([FieldIssue(field: "limit", problem: "must be 1 to 1000")])
            }
            limit = value
        }
        let attempts = try store.webhookAttempts(endpointID: endpoint.id, limit: limit).map { attempt in
            JSONValue.object([
                "eventId": .string(attempt.eventID),
                "eventType": attempt.eventType.map { .string($0.rawValue) } ?? .null,
                "attempt": .number(Double(attempt.attempt)), "attemptedAt": .time(attempt.attemptedAt),
                "httpStatus": attempt.httpStatus.map { .number(Double($0)) } ?? .null,
                "error": attempt.error.map(JSONValue.string) ?? .null,
                "durationMs": .number(Double(attempt.durationMilliseconds)),
            ])
        }
        return json(200, .object(["attempts": .array(attempts)]))
    }

    /// `POST /v1/webhooks/{id}/replay`: `{eventId}` or `{since, until?}` → the deliveries queued again
    /// (events the endpoint wants that are still kept; one already queued is not queued twice), and
    /// `nextSince` when the range holds more than `replayLimit` events.
    func replayWebhook(_ call: Call) throws -> HTTPResponse {
        let endpoint = try ownedWebhook(call)
        let body = try jsonObject(call.request)
        var reader = FieldReader()
        let eventID = reader.string(body, "eventId")
        let since = reader.time(body, "since")
        let until = reader.time(body, "until")
        if (eventID == nil) == (since == nil) { reader.fail("eventId", "give either eventId or since (and until)") }
        if eventID != nil, until != nil { reader.fail("until", "goes with since, not eventId") }
        if let since, let until, until < since { reader.fail("until", "must not be before since") }
        try reader.finish()
        let replay: WebhookReplay =
            if let eventID { .event(id: eventID) } else { .range(from: since ?? call.now, to: until ?? call.now) }
        let outcome = try store.replayWebhooks(
            endpointID: endpoint.id, replay, limit: Self.replayLimit, now: call.now)
        return json(
            202,
            .object([
                "queued": .number(Double(outcome.queued)), "nextSince": .time(outcome.resumeAt),
            ]))
    }

    // MARK: - Reading and checking

    /// The endpoint of the path if the caller may manage it; another merchant's is answered 404, as
    /// if it did not exist.
    private func ownedWebhook(_ call: Call) throws -> WebhookEndpointRecord {
        guard let endpoint = try store.webhookEndpoint(id: call.parameter("id")) else {
            throw APIError.notFound("no such webhook endpoint")
        }
        switch call.caller {
        case .staff(.admin, _): return endpoint
        case .staff(.merchant(let own), _) where own == endpoint.merchantID: return endpoint
        case .staff(.merchant, _): throw APIError.notFound("no such webhook endpoint")
        default: throw APIError.forbidden("webhooks are managed with a merchant or admin key")
        }
    }

    private func webhookMerchant(_ call: Call, named body: [String: JSONValue], _ reader: inout FieldReader)
        throws(APIError) -> String?
    {
        switch call.caller {
        case .staff(.merchant(let own), _):
            if let named = reader.string(body, "merchantId"), named != own {
                throw .forbidden("a merchant key manages only its own webhooks")
            }
            return own
        case .staff(.admin, _): return reader.require(reader.identifier(body, "merchantId"), "merchantId")
        default: throw .forbidden("webhooks are managed with a merchant or admin key")
        }
    }

    private func webhookURL(_ body: [String: JSONValue], _ reader: inout FieldReader) -> String? {
        guard let url = reader.string(body, "url") else { return nil }
        if let problem = configuration.webhookPolicy.problem(with: url) {
            reader.fail("url", problem)
            return nil
        }
        return url
    }

    private func webhookEventTypes(_ body: [String: JSONValue], _ reader: inout FieldReader) -> [WebhookEventType]? {
        guard let values = reader.array(body, "eventTypes") else { return nil }
        var types: [WebhookEventType] = []
        for (index, value) in values.enumerated() {
            guard case .string(let text) = value, let type = WebhookEventType(rawValue: text) else {
                reader.fail(
                    "eventTypes[\(index)]",
                    "must be one of " + WebhookEventType.allCases.map(\.rawValue).joined(separator: ", "))
                continue
            }
            if !types.contains(type) { types.append(type) }
        }
        return types.sorted()
    }

    private func webhookDescription(_ body: [String: JSONValue], _ reader: inout FieldReader) -> String? {
        guard let text = reader.string(body, "description") else { return nil }
        guard text.count <= 200 else {
            reader.fail("description", "must be at most 200 characters")
            return nil
        }
        return text
    }

    private func webhookEnabled(_ body: [String: JSONValue], _ reader: inout FieldReader) -> Bool? {
        switch body["enabled"] {
        case nil: return nil
        case .bool(let value)?: return value
        default:
            reader.fail("enabled", "must be true or false")
            return nil
        }
    }

    /// An endpoint as the API shows it: never its secret.
    private func webhookView(_ endpoint: WebhookEndpointRecord, counts: WebhookQueueCounts) -> JSONValue {
        let health: String =
            if !endpoint.enabled { "disabled" } else if endpoint.failingSince != nil { "failing" } else { "delivering" }
        return .object([
            "id": .string(endpoint.id), "merchantId": .string(endpoint.merchantID), "url": .string(endpoint.url),
            "description": .string(endpoint.description),
            "eventTypes": .array(
                (endpoint.eventTypes.isEmpty ? WebhookEventType.allCases : endpoint.eventTypes).map {
                    .string($0.rawValue)
                }),
            "allEventTypes": .bool(endpoint.eventTypes.isEmpty), "enabled": .bool(endpoint.enabled),
            "disabledReason": endpoint.disabledReason.map(JSONValue.string) ?? .null, "health": .string(health),
            "failingSince": .time(endpoint.failingSince), "lastDeliveredAt": .time(endpoint.lastDeliveredAt),
            "pausedUntil": .time(endpoint.pausedUntil),
            "previousSecretExpiresAt": .time(endpoint.previousSecretExpiresAt),
            "deliveries": .object([
                "pending": .number(Double(counts.pending + counts.sending)),
                "delivered": .number(Double(counts.delivered)), "failed": .number(Double(counts.failed)),
            ]),
            "createdAt": .time(endpoint.createdAt), "updatedAt": .time(endpoint.updatedAt),
        ])
    }
}
