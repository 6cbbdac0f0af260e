import Foundation
import TestSupport
import Testing

@testable import Webhooks

/// The transport on its own, against a real receiver on loopback: one easy handle carries POST after
/// POST, and nothing of one (its headers, its `Retry-After`) reaches the next.
@Suite("Webhook transport", .serialized)
struct WebhookTransportTests {
    /// Runs the transport until `count` answers came (the timeout only bounds a failure).
    static func answers(_ count: Int, from transport: WebhookTransport) -> [Int64: WebhookAnswer] {
        var answers: [Int64: WebhookAnswer] = [:]
        let deadline = Date().addingTimeInterval(30)
        while answers.count < count, Date() < deadline {
            for (tag, answer) in transport.poll(waitMilliseconds: 100) { answers[tag] = answer }
        }
        return answers
    }

    @Test func aReusedHandleCarriesOnlyItsOwnRequest() throws {
        let receiver = try WebhookReceiver()
        let transport = try WebhookTransport(
            policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true), timeoutMilliseconds: 10_000,
            caFile: nil, idleLimit: 8)
        try receiver.control(["status": 429, "retry_after": 7])
        try transport.start(tag: 1, url: receiver.url, headers: ["webhook-id: first"], body: Array("{\"n\":1}".utf8))
        let first = Self.answers(1, from: transport)[1]
        #expect(first?.status == 429)
        #expect(first?.retryAfterSeconds == 7)
        #expect(transport.idleCount == 1)

        try receiver.control(["status": 204])
        try transport.start(tag: 2, url: receiver.url, headers: ["webhook-id: second"], body: Array("{\"n\":22}".utf8))
        #expect(transport.idleCount == 0)
        let second = Self.answers(1, from: transport)[2]
        #expect(second?.status == 204)
        #expect(second?.retryAfterSeconds == nil)
        #expect(second?.error == nil)
        #expect(transport.idleCount == 1)

        let records = receiver.records()
        try #require(records.count == 2)
        #expect(records.map { $0["body"] as? String } == ["{\"n\":1}", "{\"n\":22}"])
        #expect(records.map { WebhookDeliveryTests.headers($0)["webhook-id"] } == ["first", "second"])
    }

    /// Many at once, more than are kept for reuse: every one answered under its own tag, and no more
    /// handles kept than the limit.
    @Test func manyPostsAtOnceAreEachAnsweredOnce() throws {
        let receiver = try WebhookReceiver()
        try receiver.control(["status": 204])
        let transport = try WebhookTransport(
            policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true), timeoutMilliseconds: 10_000,
            caFile: nil, idleLimit: 3)
        for round in 0..<2 {
            for index in 0..<8 {
                let tag = Int64(round * 8 + index)
                try transport.start(
                    tag: tag, url: receiver.url, headers: ["webhook-id: \(tag)"], body: Array("{}".utf8))
            }
            let answers = Self.answers(8, from: transport)
            #expect(Set(answers.keys) == Set((round * 8..<round * 8 + 8).map(Int64.init)))
            #expect(answers.values.allSatisfy { $0.status == 204 })
            #expect(transport.idleCount == 3)
        }
        let ids = receiver.records().compactMap { WebhookDeliveryTests.headers($0)["webhook-id"] }
        #expect(ids.sorted { Int($0)! < Int($1)! } == (0..<16).map(String.init))
    }

    /// A receiver that never answers: libcurl's timer ends that attempt at its deadline, while one to
    /// another receiver beside it is answered as usual.
    @Test func anAttemptWithNoAnswerEndsAtItsTimeout() throws {
        let hanging = try WebhookReceiver()
        defer { hanging.stop() }
        try hanging.control(["hang_seconds": 120])
        let fast = try WebhookReceiver()
        try fast.control(["status": 204])
        let transport = try WebhookTransport(
            policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true), timeoutMilliseconds: 500,
            caFile: nil, idleLimit: 4)
        try transport.start(tag: 1, url: hanging.url, headers: [], body: Array("{}".utf8))
        try transport.start(tag: 2, url: fast.url, headers: [], body: Array("{}".utf8))
        let answers = Self.answers(2, from: transport)
        #expect(answers[2]?.status == 204)
        let timedOut = try #require(answers[1])
        #expect(timedOut.status == nil)
        #expect(timedOut.error?.contains("Timeout") == true, "\(timedOut)")
        #expect(timedOut.durationMilliseconds >= 500)
    }

    /// `Retry-After` is found whatever the case of its name, and no other header is taken for it.
    @Test func retryAfterIsReadWhateverItsCase() throws {
        let receiver = try WebhookReceiver()
        let transport = try WebhookTransport(
            policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true), timeoutMilliseconds: 10_000,
            caFile: nil, idleLimit: 1)
        try receiver.control(["status": 503, "headers": ["rEtRy-AfTeR": "12", "X-Retry-After": "99"]])
        try transport.start(tag: 1, url: receiver.url, headers: [], body: Array("{}".utf8))
        let answer = Self.answers(1, from: transport)[1]
        #expect(answer?.status == 503)
        #expect(answer?.retryAfterSeconds == 12)
    }

    /// A receiver that offers HTTP/2 is spoken to in HTTP/1.1: this libcurl's HTTP/2 failed about one
    /// attempt in eight to nginx under load, each then waiting for its retry.
    @Test func httpsReceiversOfferingHTTP2GetHTTP1() throws {
        let receiver = try WebhookReceiver(tls: true)
        try receiver.control(["status": 204])
        let transport = try WebhookTransport(
            policy: WebhookURLPolicy(allowsHTTP: false, allowsPrivateNetworks: true), timeoutMilliseconds: 10_000,
            caFile: receiver.caFile, idleLimit: 4)
        for tag in 0..<4 {
            try transport.start(tag: Int64(tag), url: receiver.url, headers: [], body: Array("{}".utf8))
        }
        let answers = Self.answers(4, from: transport)
        #expect(answers.count == 4)
        #expect(answers.values.allSatisfy { $0.status == 204 }, "\(answers)")
        #expect(receiver.records().map { $0["alpn"] as? String } == Array(repeating: "http/1.1", count: 4))
    }
}
