import Cryptography
import Foundation
import Pusher
import TestSupport
import Testing

@Suite("APNs client against the HTTP/2 simulator", .serialized)
struct APNsClientTests {
    func request(_ simulator: APNsSimulator, token: String, jwt: String, priority: Int = 10) -> APNsRequest {
        APNsRequest(
            baseURL: simulator.baseURL, deviceToken: token, topic: "com.example.app.push-type.liveactivity",
            priority: priority, expiration: Date().addingTimeInterval(600), collapseID: nil,
            payload: Array(#"{"aps":{"event":"update","timestamp":1}}"#.utf8), providerToken: jwt
        )
    }

    /// A batch of 50 pushes goes over HTTP/2 and TLS; the simulator verifies our ES256 token with an
    /// independent implementation and records each request's headers and payload.
    @Test func batchIsDeliveredAndVerified() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: key).compact
        let client = try APNsClient(caFile: simulator.caFile)
        let requests = (0..<50).map {
            request(simulator, token: String(format: "%064x", $0), jwt: jwt, priority: $0 % 2 == 0 ? 10 : 5)
        }
        let responses = client.send(requests)
        #expect(responses.allSatisfy { $0.status == 200 && $0.transportError == nil })
        #expect(responses.allSatisfy { ($0.apnsID?.count ?? 0) == 36 })
        let records = try simulator.records()
        #expect(records.count == 50)
        let first = try #require(records.first { ($0["token"] as? String) == String(format: "%064x", 0) })
        let headers = try #require(first["headers"] as? [String: String])
        #expect(headers["apns-push-type"] == "liveactivity")
        #expect(headers["apns-topic"] == "com.example.app.push-type.liveactivity")
        #expect(headers["apns-priority"] == "10")
        #expect(first["payload"] as? String == #"{"aps":{"event":"update","timestamp":1}}"#)

        let again = client.send([request(simulator, token: "ff", jwt: jwt)])
        #expect(again.first?.status == 200)
    }

    /// Error answers carry their reason and 410 timestamp, and classify into the right action.
    @Test func errorAnswersAreClassified() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        try simulator.script([
            "dead": ["status": 410, "reason": "Unregistered", "timestamp": 1_796_212_800_000],
            "busy": ["status": 429, "reason": "TooManyRequests"],
        ])
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: key).compact
        let client = try APNsClient(caFile: simulator.caFile)
        let responses = client.send([
            request(simulator, token: "dead", jwt: jwt), request(simulator, token: "busy", jwt: jwt),
        ])
        #expect(responses[0].status == 410)
        #expect(responses[0].reason == APNsReason("Unregistered"))
        #expect(responses[0].timestamp == Date(timeIntervalSince1970: 1_796_212_800))
        #expect(
            PushResultClassifier.action(
                status: responses[0].status, reason: responses[0].reason, timestamp: responses[0].timestamp,
                environmentConfirmed: true
            ) == .dropToken(registeredBefore: Date(timeIntervalSince1970: 1_796_212_800))
        )
        #expect(responses[1].status == 429)
        #expect(responses[1].reason == APNsReason("TooManyRequests"))
    }

    /// A token signed by another key is refused (403 InvalidProviderToken), which pauses the environment.
    @Test func foreignSignatureIsRefused() throws {
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let otherPEM = try String(contentsOfFile: simulator.directory + "/ca.key", encoding: .utf8)
        let other = try P256SigningKey(pem: otherPEM)
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: other).compact
        let client = try APNsClient(caFile: simulator.caFile)
        let response = try #require(client.send([request(simulator, token: "aa", jwt: jwt)]).first)
        #expect(response.status == 403)
        #expect(response.reason == APNsReason("InvalidProviderToken"))
        #expect(
            PushResultClassifier.action(
                status: 403, reason: response.reason, timestamp: nil, environmentConfirmed: true)
                == .pauseEnvironment
        )
    }

    /// No server at the address: a transport error, which retries on a new connection.
    @Test func unreachableHostIsATransportError() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: key).compact
        let client = try APNsClient(timeoutMilliseconds: 2000)
        let request = APNsRequest(
            baseURL: "https://127.0.0.1:9", deviceToken: "aa", topic: "t.push-type.liveactivity", priority: 5,
            expiration: Date(), collapseID: nil, payload: Array("{}".utf8), providerToken: jwt
        )
        let response = try #require(client.send([request]).first)
        #expect(response.status == nil)
        #expect(response.transportError != nil)
        #expect(
            PushResultClassifier.action(status: nil, reason: nil, timestamp: nil, environmentConfirmed: true)
                == .retry(reconnect: true)
        )
    }
}

@Suite("APNs connection loss", .serialized)
struct ConnectionLossTests {
    /// The APNs peer dies under the client's kept connection and comes back: the next batch fails
    /// with transport errors (which the worker retries) or reconnects at once, and the client keeps
    /// working without being rebuilt.
    @Test func clientReconnectsAfterThePeerDied() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: key).compact
        let client = try APNsClient(caFile: simulator.caFile, timeoutMilliseconds: 3000)
        func batch(_ prefix: String) -> [APNsResponse] {
            client.send(
                (0..<10).map {
                    APNsRequest(
                        baseURL: simulator.baseURL, deviceToken: "\(prefix)-\($0)",
                        topic: "com.example.app.push-type.liveactivity", priority: 5,
                        expiration: Date().addingTimeInterval(600), collapseID: nil,
                        payload: Array(#"{"aps":{"event":"update","timestamp":1}}"#.utf8), providerToken: jwt)
                })
        }
        #expect(batch("before").allSatisfy { $0.status == 200 })
        try simulator.restart()
        let during = batch("during")
        #expect(during.allSatisfy { $0.status == 200 || ($0.status == nil && $0.transportError != nil) })
        #expect(batch("after").allSatisfy { $0.status == 200 })
        #expect(client.connectionsOpened >= 2)
    }
}

@Suite("APNs connection kept while idle", .serialized)
struct IdleConnectionTests {
    /// A quiet spell does not cost a new connection (libcurl's own default would replace one idle
    /// for two minutes); a connection idle past `maximumIdleSeconds` is replaced.
    @Test func idleConnectionIsReusedUntilItsLimit() throws {
        let key = try P256SigningKey(pem: testKeyPEM)
        let simulator = try APNsSimulator(publicKeyOf: testKeyPEM)
        defer { simulator.stop() }
        let jwt = try ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(), key: key).compact
        func push(_ client: APNsClient, _ token: String) -> Int? {
            client.send([
                APNsRequest(
                    baseURL: simulator.baseURL, deviceToken: token, topic: "com.example.app.push-type.liveactivity",
                    priority: 5, expiration: Date().addingTimeInterval(600), collapseID: nil,
                    payload: Array(#"{"aps":{"event":"update","timestamp":1}}"#.utf8), providerToken: jwt)
            ])[0].status
        }
        let keeping = try APNsClient(caFile: simulator.caFile, connectionsPerHost: 1)
        let replacing = try APNsClient(caFile: simulator.caFile, connectionsPerHost: 1, maximumIdleSeconds: 1)
        #expect(push(keeping, "k-1") == 200)
        #expect(push(replacing, "r-1") == 200)
        sleep(3)
        #expect(push(keeping, "k-2") == 200)
        #expect(push(replacing, "r-2") == 200)
        #expect(keeping.connectionsOpened == 1)
        #expect(replacing.connectionsOpened == 2)
    }
}
