import Cryptography
import Foundation
import Projection
import Synchronization
import TestSupport
import Testing

@testable import Pusher

/// The FCM client against the FCM simulator: real HTTP/2 over TLS on loopback, access tokens from its
/// token endpoint, which checks the RS256 assertion with PyJWT against the service account's key.
/// Counts calls from any thread.
final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        value.withLock {
            $0 += 1; return $0
        }
    }
}

@Suite("FCM: access tokens and messages against the simulator", .serialized, .timeLimit(.minutes(2)))
struct FCMClientTests {
    struct Setup {
        let simulator: FCMSimulator
        let account: GoogleServiceAccount
        let tokens: FCMAccessTokens
        let client: FCMClient

        init(tokenLifetime: Int = 3600, droppable: Bool = false) throws {
            simulator = try FCMSimulator(tokenLifetime: tokenLifetime, droppable: droppable)
            account = try GoogleServiceAccount(json: simulator.serviceAccountJSON)
            tokens = FCMAccessTokens(account: account, exchange: CurlTokenExchange(caFile: simulator.caFile))
            client = try FCMClient(caFile: simulator.caFile)
        }

        func request(device: String, version: Int64 = 1, now: Date = Date()) throws -> FCMRequest {
            let update = AndroidLiveUpdate(
                attributes: Array(#"{"orderId":"o_1"}"#.utf8), contentState: Array(#"{"status":"preparing"}"#.utf8),
                version: version, event: .update,
                highPriority: true, timeToLive: 3600)
            return FCMRequest(
                baseURL: simulator.baseURL, projectID: account.projectID,
                body: try #require(update.requestBody(registrationToken: device)),
                accessToken: try tokens.token(now: now).value)
        }

        func sends() throws -> [[String: Any]] {
            try simulator.records().filter { $0["kind"] as? String == "send" }
        }
    }

    /// Messages are accepted with a token the endpoint granted for the assertion; the token is
    /// fetched once and reused, and each message reaches the simulator whole.
    @Test func messagesGoThroughWithOneAccessToken() throws {
        let setup = try Setup()
        let requests = try (0..<5).map { try setup.request(device: "device-\($0)", version: Int64($0 + 1)) }
        let responses = setup.client.send(requests)
        #expect(responses.map(\.status) == Array(repeating: 200, count: 5))
        #expect(responses.allSatisfy { $0.messageName?.hasPrefix("projects/deliveryd-test/messages/") == true })
        #expect(responses.map { FCMResultClassifier.action(for: $0) } == Array(repeating: .delivered, count: 5))
        #expect(setup.tokens.fetchedCount == 1)
        let grants = try setup.simulator.records().filter { $0["kind"] as? String == "token" }
        #expect(grants.count == 1)
        let claims = grants.first?["claims"] as? [String: Any]
        #expect(claims?["iss"] as? String == FCMSimulator.clientEmail)
        #expect(claims?["scope"] as? String == FCMAccessTokens.scope)
        let sent = try setup.sends()
        #expect(Set(sent.compactMap { $0["token"] as? String }) == Set((0..<5).map { "device-\($0)" }))
        // Only a connection or two for the batch: the messages are streams of one HTTP/2 connection.
        #expect(setup.client.connectionsOpened <= 2)
    }

    /// When FCM refuses a token (401), the token is dropped and the next one fetched works.
    @Test func aRefusedAccessTokenIsReplaced() throws {
        let setup = try Setup()
        var stale = try setup.request(device: "device-a")
        let first = try setup.tokens.token(now: Date())
        stale.accessToken = "ya29.not-issued"
        let refused = setup.client.send([stale])[0]
        #expect(refused.status == 401 && FCMResultClassifier.action(for: refused) == .refreshTokenAndRetry)
        setup.tokens.discard(first)
        let second = try setup.tokens.token(now: Date())
        #expect(second != first && setup.tokens.fetchedCount == 2)
        stale.accessToken = second.value
        #expect(setup.client.send([stale])[0].status == 200)
    }

    /// The cache's arithmetic, with an exchange that counts (the real endpoint refuses an assertion
    /// dated in the future, which a test of expiry would need): the token is kept until five minutes
    /// before it expires, then replaced; discarding another token than the current one keeps it.
    @Test func accessTokensAreReplacedFiveMinutesBeforeExpiry() throws {
        struct CountingExchange: FCMTokenExchange {
            let calls = Counter()
            func exchange(assertion: String, at url: String) throws(FCMAuthenticationError) -> (
                token: String, lifetime: TimeInterval
            ) {
                #expect(assertion.split(separator: ".").count == 3)
                return ("token-\(calls.next())", 3600)
            }
        }
        let simulator = try FCMSimulator()
        let account = try GoogleServiceAccount(json: simulator.serviceAccountJSON)
        let tokens = FCMAccessTokens(account: account, exchange: CountingExchange())
        let start = Date()
        let first = try tokens.token(now: start)
        #expect(try tokens.token(now: start.addingTimeInterval(3299)) == first)
        let second = try tokens.token(now: start.addingTimeInterval(3300))
        #expect(second.value == "token-2" && second.expiresAt == start.addingTimeInterval(3300 + 3600))
        tokens.discard(first)
        #expect(try tokens.token(now: start.addingTimeInterval(3301)) == second)
        #expect(tokens.fetchedCount == 2)
    }

    /// An assertion signed by another key is refused by the endpoint (PyJWT's verification), as a
    /// configuration error that waiting does not mend.
    @Test func anAssertionFromAnotherKeyIsRefused() throws {
        let setup = try Setup()
        let other = try FCMSimulator()
        var json = try JSONSerialization.jsonObject(with: Data(other.serviceAccountJSON)) as? [String: Any] ?? [:]
        json["token_uri"] = setup.simulator.tokenURL
        let impostor = try GoogleServiceAccount(json: Array(JSONSerialization.data(withJSONObject: json)))
        let tokens = FCMAccessTokens(account: impostor, exchange: CurlTokenExchange(caFile: setup.simulator.caFile))
        let error = #expect(throws: FCMAuthenticationError.self) { try tokens.token(now: Date()) }
        #expect(error?.isTransient == false)
        #expect(error?.description.contains("invalid_grant") == true)
    }

    /// FCM's answers, classified as the pusher acts on them: a dead token is dropped, a malformed one
    /// too, throttling and outages are retried after FCM's Retry-After, a wrong project pauses it.
    @Test func answersAreClassified() throws {
        let setup = try Setup()
        try setup.simulator.script([
            "gone": ["status": 404, "code": "UNREGISTERED"],
            "malformed": ["invalid_token": true],
            "throttled": ["status": 429, "code": "QUOTA_EXCEEDED", "retry_after": 7],
            "down": ["status": 503, "code": "UNAVAILABLE"],
            "broken": ["status": 500, "code": "INTERNAL"],
        ])
        let devices = ["gone", "malformed", "throttled", "down", "broken", "fine"]
        let responses = setup.client.send(try devices.map { try setup.request(device: $0) })
        let actions = Dictionary(uniqueKeysWithValues: zip(devices, responses.map(FCMResultClassifier.action)))
        #expect(actions["gone"] == .dropToken)
        #expect(actions["malformed"] == .dropToken)
        #expect(responses[1].invalidField == "message.token")
        #expect(actions["throttled"] == .retry(after: 7))
        #expect(actions["down"] == .retry(after: nil))
        #expect(actions["broken"] == .retry(after: nil))
        #expect(actions["fine"] == .delivered)

        var elsewhere = try setup.request(device: "fine")
        elsewhere.projectID = "someone-elses-project"
        let mismatch = setup.client.send([elsewhere])[0]
        #expect(
            mismatch.errorCode == "SENDER_ID_MISMATCH" && FCMResultClassifier.action(for: mismatch) == .pauseProject)
    }

    /// A message over FCM's 4 KB of data is never built; one the simulator finds malformed is a dead
    /// letter (it would fail again), not the device's fault.
    @Test func malformedMessagesAreDeadLetters() throws {
        let setup = try Setup()
        let large = AndroidLiveUpdate(
            attributes: Array(#"{"orderId":"o_1"}"#.utf8),
            contentState: Array(String(repeating: "x", count: 4100).utf8), version: 1, event: .update,
            highPriority: false, timeToLive: 60)
        #expect(large.requestBody(registrationToken: "device") == nil)
        let collapsing =
            #"{"message":{"android":{"collapse_key":"order","priority":"HIGH","ttl":"60s"},"#
            + #""data":{"event":"update"},"token":"device"}}"#
        let request = FCMRequest(
            baseURL: setup.simulator.baseURL, projectID: setup.account.projectID, body: Array(collapsing.utf8),
            accessToken: try setup.tokens.token(now: Date()).value)
        let refused = setup.client.send([request])[0]
        #expect(refused.status == 400 && refused.invalidField == "message.android.collapse_key")
        #expect(FCMResultClassifier.action(for: refused) == .deadLetter)
    }

    /// A connection cut mid-batch (no answer, no GOAWAY) is a transport failure, retried; the next
    /// batch opens a new connection and goes through.
    @Test func aDroppedConnectionIsRetried() throws {
        let setup = try Setup(droppable: true)
        try setup.simulator.script(["cut": ["drop_once": true]])
        let first = setup.client.send([try setup.request(device: "cut")])[0]
        #expect(first.status == nil && first.transportError != nil)
        #expect(FCMResultClassifier.action(for: first) == .retry(after: nil))
        let again = setup.client.send([try setup.request(device: "cut")])[0]
        #expect(again.status == 200)
    }
}
