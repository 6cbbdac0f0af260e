import DeliveryActivityContract
import Foundation
import HTTPServer
import OrderDomain
import Projection
import Storage
import Synchronization
import TestSupport
import Testing

@testable import DeliveryAPI

@Suite("Orders over the API")
struct OrderAPITests {
    /// A bad order body is refused with 422 and every bad field named by its JSON path; nothing is stored.
    @Test func validationNamesEachBadField() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        var body = APIHarness.orderBody(number: "A-1", now: api.now)
        body["items"] = [["name": "Tea", "quantity": 1, "price": 2], ["name": "Cake", "quantity": "two", "price": 3]]
        body["customer"] = ["id": "c-1", "name": "Ana", "locale": "en"]
        body["estimatedArrival"] = "tomorrow"
        let reply = try api.send("POST", "/v1/orders", as: merchant, json: body)
        #expect(reply.status == 422)
        #expect(reply.errorCode == "validation_failed")
        let details = (reply.json["error"] as? [String: Any])?["details"] as? [String: Any]
        let fields = Set(((details?["fields"] as? [[String: Any]]) ?? []).compactMap { $0["field"] as? String })
        #expect(fields == ["items[1].quantity", "customer.phone", "estimatedArrival"])
        #expect(try api.store.orderCountsByStatus().isEmpty)
    }

    /// The rules `docs/openapi.yaml` states, held by the server too: `null` is not a string, ids have
    /// no spaces (an admin's `merchantId` included), a malformed field is refused even when the
    /// status would not change, and an `Idempotency-Key` is visible ASCII.
    @Test func requestRulesMatchTheAPIDocument() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        var body = APIHarness.orderBody(number: "A-1", now: api.now)
        body["note"] = NSNull()
        let nullNote = try api.send("POST", "/v1/orders", as: merchant, json: body)
        #expect(nullNote.status == 422 && nullNote.fieldProblems["note"] == "must be a string")
        body["note"] = "ring twice"
        for merchantID in ["", "m 1", "m\u{85}1", String(repeating: "m", count: 65)] {
            body["merchantId"] = merchantID
            let reply = try api.send("POST", "/v1/orders", as: APIHarness.adminKey, json: body)
            #expect(
                reply.status == 422 && reply.fieldProblems["merchantId"] != nil,
                "merchantId \(merchantID.debugDescription)")
        }
        body["merchantId"] = "m-1"
        body["customer"] = ["id": "c 42", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"]
        #expect(try api.send("POST", "/v1/orders", as: merchant, json: body).fieldProblems["customer.id"] != nil)

        let order = try api.createOrder(merchant, number: "A-2")
        let path = "/v1/orders/\(order.id)/status"
        #expect(try api.send("POST", path, as: merchant, json: ["status": "preparing"]).status == 200)
        let controlReason = try api.send(
            "POST", path, as: merchant, json: ["status": "preparing", "reason": "a\u{84}b"])
        #expect(controlReason.status == 422, "\(controlReason.json)")
        let unchanged = try api.send("POST", path, as: merchant, json: ["status": "preparing"])
        #expect(unchanged.status == 200, "\(unchanged.json)")
        let spaced = try api.send(
            "POST", path, as: merchant, json: ["status": "pickup"], headers: [("Idempotency-Key", "two words")])
        #expect(spaced.status == 400)
        #expect(try api.store.events(orderID: order.id).map(\.to.rawValue) == ["placed", "preparing"])
    }

    /// A body that is not declared JSON is 415; malformed JSON or a non-object is 400 invalid_json.
    @Test func bodiesMustBeJSONObjects() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let auth = ("Authorization", "Bearer " + merchant)
        let plain = api.dispatch(
            HTTPRequest(
                method: "POST", path: "/v1/orders", headers: [auth, ("Content-Type", "text/plain")],
                body: Array("{}".utf8)))
        #expect(plain.status == 415 && plain.errorCode == "unsupported_media_type")
        for text in ["{\"number\": ", "[1, 2]", "", "nul"] {
            let reply = api.dispatch(
                HTTPRequest(
                    method: "POST", path: "/v1/orders",
                    headers: [auth, ("Content-Type", "application/json; charset=utf-8")],
                    body: Array(text.utf8)))
            #expect(reply.status == 400 && reply.errorCode == "invalid_json", "body \(text)")
        }
    }

    /// JSON is `application/json` or an `application/…+json` type, in any case, with or without
    /// parameters and the spaces around them; anything else is not.
    @Test func contentTypesThatDeclareJSON() {
        for declared in [
            "application/json", "Application/JSON", "application/json; charset=utf-8", " application/json ;q=1",
            "\tapplication/json\t", "application/merge-patch+json", "APPLICATION/VND.API+JSON; charset=utf-8",
        ] {
            #expect(DeliveryService.declaresJSON(declared), "\(declared)")
        }
        for other in [
            "text/plain", "application/jsonx", "application/xml", "json", "", ";application/json", "text/x+json",
            "application/json-seq", "app lication/json",
        ] {
            #expect(!DeliveryService.declaresJSON(other), "\(other)")
        }
    }

    /// Two `Authorization` headers are refused with 400 before either is read, whichever comes first
    /// and in any case; one is read as before.
    @Test func twoAuthorizationHeadersAreRefused() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        for pair in [
            [("Authorization", "Bearer " + merchant), ("authorization", "Bearer " + APIHarness.adminKey)],
            [("AUTHORIZATION", "Bearer nonsense"), ("Authorization", "Bearer " + merchant)],
        ] {
            let reply = api.dispatch(HTTPRequest(method: "GET", path: "/v1/admin/keys", headers: pair, body: []))
            #expect(reply.status == 400)
            #expect(reply.errorCode == "bad_request")
        }
        let one = try api.send("GET", "/v1/admin/keys", as: APIHarness.adminKey)
        #expect(one.status == 200)
    }

    /// The state machine of design §2 over HTTP: applied, unchanged, illegal_transition, order_closed.
    @Test func statusChangesFollowTheStateMachine() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let path = "/v1/orders/\(order.id)/status"

        let applied = try api.send("POST", path, as: merchant, json: ["status": "pickup"])
        #expect(applied.status == 200 && applied.json["transition"] as? String == "applied")
        let again = try api.send("POST", path, as: merchant, json: ["status": "pickup"])
        #expect(again.status == 200 && again.json["transition"] as? String == "unchanged")

        let backward = try api.send("POST", path, as: merchant, json: ["status": "preparing"])
        #expect(backward.status == 409 && backward.errorCode == "illegal_transition")
        let details = (backward.json["error"] as? [String: Any])?["details"] as? [String: Any]
        #expect(details?["currentStatus"] as? String == "pickup")

        #expect(try api.send("POST", path, as: APIHarness.adminKey, json: ["status": "delivered"]).status == 200)
        let retried = try api.send("POST", path, as: APIHarness.adminKey, json: ["status": "delivered"])
        #expect(retried.status == 200 && retried.json["transition"] as? String == "unchanged")
        let cancel = try api.send("POST", path, as: merchant, json: ["status": "cancelled"])
        #expect(cancel.status == 409 && cancel.errorCode == "order_closed")

        let history = try api.store.events(orderID: order.id).map(\.to.rawValue)
        #expect(history == ["placed", "pickup", "delivered"])
    }

    /// Ids sort in creation order (their first 12 hex digits are the milliseconds), so that recent
    /// orders share index pages, and keep 64 random bits after that.
    @Test func orderIDsSortByCreationTimeAndStayUnguessable() {
        let earlier = Date(timeIntervalSince1970: 1_800_000_000.5)
        let first = Credentials.newOrderIDSuffix(now: earlier)
        let sameMoment = Credentials.newOrderIDSuffix(now: earlier)
        let later = Credentials.newOrderIDSuffix(now: earlier.addingTimeInterval(0.001))
        let hexDigits = Set("0123456789abcdef")
        for id in [first, sameMoment, later] { #expect(id.count == 28 && id.allSatisfy(hexDigits.contains)) }
        #expect(first.prefix(12) == "01a3185c51f4")  // 1,800,000,000,500 ms
        #expect(first.prefix(12) == sameMoment.prefix(12) && first.dropFirst(12) != sameMoment.dropFirst(12))
        #expect(first < later && sameMoment < later)
    }

    /// The same Idempotency-Key replays the first answer; with another body it is 422; the same
    /// order number without a key returns the first order (200) without a new tracking token.
    @Test func idempotentCreation() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let body = APIHarness.orderBody(number: "A-1", now: api.now)
        let key = [("Idempotency-Key", "create-A-1")]
        let first = try api.send("POST", "/v1/orders", as: merchant, json: body, headers: key)
        #expect(first.status == 201)
        let replay = try api.send("POST", "/v1/orders", as: merchant, json: body, headers: key)
        #expect(replay.status == 201 && replay.body == first.body)
        #expect(replay.header("Idempotent-Replayed") == "true")

        var changed = body
        changed["note"] = "leave at the door"
        let mismatch = try api.send("POST", "/v1/orders", as: merchant, json: changed, headers: key)
        #expect(mismatch.status == 422 && mismatch.errorCode == "idempotency_mismatch")

        let duplicate = try api.send("POST", "/v1/orders", as: merchant, json: body)
        #expect(duplicate.status == 200 && duplicate.json["trackingToken"] == nil)
        let firstID = (first.json["order"] as? [String: Any])?["id"] as? String
        #expect((duplicate.json["order"] as? [String: Any])?["id"] as? String == firstID)
        #expect(try api.store.orderCountsByStatus()[.placed] == 1)

        let other = try api.key("merchant", merchant: "m-2")
        #expect(try api.send("POST", "/v1/orders", as: other, json: body, headers: key).status == 201)

        // The replay that holds the tracking token is sealed: the token is not in the kept answer,
        // nor (on SQLite, whose files a test can read) anywhere in the files.
        let token = try #require(first.json["trackingToken"] as? String)
        let keyID = try #require(try api.store.apiKeys().first { $0.role == .merchant && $0.merchantID == "m-1" }?.id)
        let kept = try #require(
            try api.store.idempotentResponse(principal: "key:" + keyID, key: "create-A-1", now: api.now))
        #expect(Data(kept.body).range(of: Data(token.utf8)) == nil, "the kept answer holds the token in clear")
        if let database = api.store as? Database {
            _ = try database.checkpoint()
            for suffix in ["", "-wal"] {
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: database.path + suffix))) ?? Data()
                #expect(bytes.range(of: Data(token.utf8)) == nil, "the tracking token is in clear in \(suffix)")
                #expect(bytes.range(of: Data("dt_".utf8)) == nil)
            }
        }
    }

    /// A refused change inside an idempotent request leaves no record; the same key then runs again.
    @Test func refusedRequestKeepsNoRecord() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let key = [("Idempotency-Key", "deliver-too-early")]
        let path = "/v1/orders/\(order.id)/status"
        let refused = try api.send("POST", path, as: merchant, json: ["status": "delivered"], headers: key)
        #expect(refused.status == 403)
        let admin = try api.send("POST", path, as: APIHarness.adminKey, json: ["status": "preparing"], headers: key)
        #expect(admin.status == 200 && admin.header("Idempotent-Replayed") == nil)
        let again = try api.send("POST", path, as: APIHarness.adminKey, json: ["status": "preparing"], headers: key)
        #expect(again.header("Idempotent-Replayed") == "true" && again.json["transition"] as? String == "applied")
    }

    /// A merchant re-issues a tracking token: the old one stops working at once, the new one works;
    /// riders, customers and other merchants cannot. A token stops working a set time after its
    /// order ended.
    @Test func trackingTokensAreReissuedAndExpire() throws {
        let clock = TestClock(Date())
        let directory = NSTemporaryDirectory() + "api-expiry-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: clock.now))
        let api = try APIHarness(
            router: DeliveryService(
                store: store,
                configuration: modified(DeliveryServiceConfiguration(defaultBundleID: "com.example.app")) {
                    $0.trackingTokenLifetime = 3600
                },
                clock: { clock.now }
            ).router(), store: store)
        let merchant = try api.key("merchant", merchant: "m-1")
        let rider = try api.key("rider", merchant: "m-1", rider: "r-1")
        let other = try api.key("merchant", merchant: "m-2")
        let order = try api.createOrder(merchant, number: "A-1")
        let path = "/v1/orders/\(order.id)/tracking-token"
        #expect(try api.send("POST", path, as: rider).status == 404)
        #expect(try api.send("POST", path, as: other).status == 404)
        #expect(try api.send("POST", path, as: order.token).status == 403)
        let reissued = try api.send("POST", path, as: merchant)
        let token = try #require(reissued.json["trackingToken"] as? String)
        #expect(reissued.status == 201 && reissued.header("Cache-Control") == "no-store")
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: order.token).status == 401)
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: token).status == 200)

        #expect(
            try api.send("POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "cancelled"]).status
                == 200)
        clock.advance(3000)
        #expect(try api.send("GET", "/v1/orders/\(order.id)", as: token).status == 200)
        clock.advance(700)
        let expired = try api.send("GET", "/v1/orders/\(order.id)", as: token)
        #expect(expired.status == 401 && expired.errorCode == "unauthorized")
    }

    /// The customer's view holds the projection only: no phone, address, payment or note.
    @Test func publicViewIsTheProjection() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let reply = try api.send("GET", "/v1/orders/\(order.id)", as: order.token)
        #expect(reply.status == 200)
        // Without the order's id: a random id may hold "4242" (it did, 1 run in some hundreds).
        let text = String(decoding: reply.body, as: UTF8.self).replacingOccurrences(of: order.id, with: "")
        for secret in ["1234567", "Hauptstr", "4242", "visa", "ring twice", "Ana"] {
            #expect(!text.contains(secret), "public view leaks \(secret)")
        }
        let live = try api.send("GET", "/v1/orders/\(order.id)/live-activity", as: order.token).json
        let state = live["contentState"] as? [String: Any]
        #expect(state?["status"] as? String == "placed" && state?["statusText"] as? String == "Bestellt")
        let expectedETA = ((api.now.timeIntervalSinceReferenceDate + 1800) / 60).rounded() * 60
        #expect(state?["estimatedArrival"] as? Double == expectedETA)
        #expect((live["attributes"] as? [String: Any])?["orderNumber"] as? String == "A-1")
    }
}

@Suite("Credentials and activities over the API")
struct CredentialAPITests {
    /// A revoked or malformed credential is 401 with a Bearer challenge.
    @Test func revokedAndMalformedKeysAreRefused() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let id = String(merchant.split(separator: "_")[1])
        #expect(try api.send("GET", "/v1/orders/x", as: merchant).status == 404)
        #expect(try api.send("DELETE", "/v1/admin/keys/\(id)", as: APIHarness.adminKey).status == 204)
        let revoked = try api.send("GET", "/v1/orders/x", as: merchant)
        #expect(revoked.status == 401 && revoked.errorCode == "unauthorized")
        #expect(revoked.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        let tampered = merchant.dropLast() + (merchant.last == "0" ? "1" : "0")
        let keyOfOther = try api.key("merchant", merchant: "m-1")
        #expect(try api.send("GET", "/v1/orders/x", as: String(tampered)).status == 401)
        #expect(try api.send("GET", "/v1/orders/x", as: keyOfOther).status == 404)
        let basic = api.dispatch(
            HTTPRequest(method: "GET", path: "/v1/orders/x", headers: [("Authorization", "Basic Zm9v")]))
        #expect(basic.status == 401)
        let listed = try api.send("GET", "/v1/admin/keys", as: APIHarness.adminKey)
        #expect(!String(decoding: listed.body, as: UTF8.self).contains(String(merchant.suffix(20))))
    }

    /// A key revoked in the store without this node's API (another node, `deliveryd keys revoke`)
    /// works from this node's memory until its next check of the key generation, and not after.
    @Test func aKeyRevokedElsewhereStopsAtTheNextCheck() throws {
        let directory = NSTemporaryDirectory() + "api-" + UUID().uuidString
        let store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: Date()))
        let service = DeliveryService(
            store: store, configuration: DeliveryServiceConfiguration(defaultBundleID: "com.example.app"))
        let api = try APIHarness(router: service.router(), store: store, directory: directory)
        let merchant = try api.key("merchant", merchant: "m-1")
        let other = try api.key("merchant", merchant: "m-1")
        let id = String(merchant.split(separator: "_")[1])
        service.checkKeyChanges()
        #expect(try api.send("GET", "/v1/orders/x", as: merchant).status == 404)
        #expect(try api.store.revokeAPIKey(id: id, now: Date()))
        #expect(try api.send("GET", "/v1/orders/x", as: merchant).status == 404, "kept in memory until the check")
        service.checkKeyChanges()
        #expect(try api.send("GET", "/v1/orders/x", as: merchant).status == 401)
        #expect(try api.send("GET", "/v1/orders/x", as: other).status == 404, "the other keys read again")
    }

    /// The assigned rider sees what the delivery needs and never payment, prices or the customer's
    /// id; once the order ended, no contact details either. Its own status changes answer the same view.
    @Test func riderSeesWhatDeliveryNeeds() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let rider = try api.key("rider", merchant: "m-1", rider: "r-1")
        let order = try api.createOrder(merchant, number: "R-1")
        #expect(
            try api.send(
                "PUT", "/v1/orders/\(order.id)/rider", as: merchant, json: ["riderId": "r-1", "name": "Marco Rossi"]
            ).status == 200)
        let open = try api.send("GET", "/v1/orders/\(order.id)", as: rider)
        let view = try #require(open.json["order"] as? [String: Any])
        #expect(view["payment"] == nil && view["merchantId"] == nil)
        #expect((view["customer"] as? [String: Any]).map { Set($0.keys) } == ["firstName", "phone"])
        #expect((view["customer"] as? [String: Any])?["firstName"] as? String == "Ana")
        #expect(view["address"] as? String == "Hauptstr. 1, 10115 Berlin" && view["note"] as? String == "ring twice")
        #expect((view["items"] as? [[String: Any]])?.first.map { Set($0.keys) } == ["name", "quantity"])
        let text = String(decoding: open.body, as: UTF8.self)
        // The price as a JSON value, not as digits: a timestamp such as "…:38.522Z" holds "8.5".
        for secret in ["4242", "visa", "card", "c-42", "\"price\"", ":8.5"] {
            #expect(!text.contains(secret), "\(secret)")
        }

        for status in ["pickup", "delivering", "delivered"] {
            let changed = try api.send("POST", "/v1/orders/\(order.id)/status", as: rider, json: ["status": status])
            #expect(changed.status == 200 && (changed.json["order"] as? [String: Any])?["payment"] == nil)
        }
        let ended = try #require(
            try api.send("GET", "/v1/orders/\(order.id)", as: rider).json["order"] as? [String: Any])
        #expect(ended["address"] == nil && ended["note"] == nil)
        #expect((ended["customer"] as? [String: Any]).map { Set($0.keys) } == ["firstName"])
        // The merchant still sees everything.
        let staff = try api.send("GET", "/v1/orders/\(order.id)", as: merchant).json["order"] as? [String: Any]
        #expect(staff?["payment"] != nil && staff?["address"] != nil)
    }

    /// Answers that carry secrets or customers' data may not be kept by any cache; the dashboard may
    /// not be framed.
    @Test func noStoreAndNoFraming() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let created = try api.send(
            "POST", "/v1/orders", as: merchant, json: APIHarness.orderBody(number: "N-1", now: api.now))
        #expect(created.status == 201 && created.header("Cache-Control") == "no-store")
        let key = try api.send("POST", "/v1/admin/keys", as: APIHarness.adminKey, json: ["role": "admin"])
        #expect(key.status == 201 && key.header("Cache-Control") == "no-store")
        let refused = try api.send("GET", "/v1/admin/keys", as: "dk_nobody_0000")
        #expect(refused.status == 401 && refused.header("Cache-Control") == "no-store")
        let page = try api.send("GET", "/admin")
        #expect(page.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true)
    }

    /// A new token for the same activity replaces the old; a closed order refuses registration (409).
    @Test func activityRegistration() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let path = "/v1/orders/\(order.id)/activities/act-1"
        for token in ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"] {
            let reply = try api.send(
                "PUT", path, as: order.token, json: ["pushToken": token, "environment": "production"])
            #expect(reply.status == 200)
        }
        let stored = try api.store.activity(orderID: order.id, activityID: "act-1")
        #expect(stored?.pushToken == "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" && stored?.bundleID == "com.example.app")

        let bad = try api.send("PUT", path, as: order.token, json: ["pushToken": "xyz", "environment": "staging"])
        #expect(bad.status == 422)

        #expect(try api.send("DELETE", path, as: order.token).status == 204)
        #expect(try api.store.activity(orderID: order.id, activityID: "act-1")?.endedAt != nil)
        #expect(try api.send("DELETE", "/v1/orders/\(order.id)/activities/nope", as: order.token).status == 404)

        #expect(
            try api.send("POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "cancelled"]).status
                == 200)
        let closed = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/act-2", as: order.token,
            json: ["pushToken": "cccccccccccccccccccccccccccccccc", "environment": "production"])
        #expect(closed.status == 409 && closed.errorCode == "order_closed")
        #expect(try api.store.activity(orderID: order.id, activityID: "act-2") == nil)
    }

    /// What the activity shows is recorded as what it was last sent, so the pusher sends the current
    /// state only when it differs; a malformed or out-of-range `contentState` (a date no `Date` could
    /// hold, a stage past 4, a status deliveryd never sends) is `422` naming each field, and stores nothing.
    @Test func registrationRecordsWhatTheActivityShows() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let shown = try #require(
            try api.send("GET", "/v1/orders/\(order.id)/live-activity", as: order.token).json["contentState"]
                as? [String: Any])
        let registered = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/a", as: order.token,
            json: ["pushToken": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "environment": "production", "contentState": shown])
        #expect(registered.status == 200)
        let record = try #require(try api.store.activity(orderID: order.id, activityID: "a"))
        #expect(record.shown?.status == .placed)
        let projector = LiveActivityProjector()
        let current = try #require(try api.store.order(id: order.id))
        #expect(record.shown?.fingerprint == projector.fingerprint(projector.contentState(for: current)))
        #expect(try api.store.outboxDepth().count == 1)

        let hostile: [String: Any] = [
            "status": "flying", "stage": 9, "progress": 7, "statusText": 3, "estimatedArrival": 1e300,
        ]
        let refused = try api.send(
            "PUT", "/v1/orders/\(order.id)/activities/b", as: order.token,
            json: [
                "pushToken": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "environment": "production", "contentState": hostile,
            ])
        #expect(refused.status == 422 && refused.errorCode == "validation_failed")
        let fields = Set(
            ((refused.json["error"] as? [String: Any])?["details"] as? [String: Any])?["fields"]
                .flatMap { $0 as? [[String: Any]] }?.compactMap { $0["field"] as? String } ?? [])
        #expect(
            fields == [
                "contentState.status", "contentState.stage", "contentState.progress", "contentState.statusText",
                "contentState.estimatedArrival",
            ])
        #expect(try api.store.activity(orderID: order.id, activityID: "b") == nil)
    }
}

@Suite("Apps with APNs keys")
struct KnownAppsTests {
    /// With APNs keys configured, an activity of an app deliveryd has no key for is refused up front.
    @Test func unknownAppIsRefused() throws {
        let directory = NSTemporaryDirectory() + "apps-api-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(APIHarness.adminKey, now: Date()))
        let router = DeliveryService(
            store: store,
            configuration: modified(DeliveryServiceConfiguration(defaultBundleID: "com.example.app")) {
                $0.knownBundleIDs = ["com.example.app", "com.whitelabel.app"]
            }
        ).router()
        let api = try APIHarness(router: router, store: store)
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        let path = "/v1/orders/\(order.id)/activities/a"
        let token = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        for (bundle, status) in [("com.whitelabel.app", 200), ("com.unknown.app", 422)] {
            let reply = try api.send(
                "PUT", path, as: order.token,
                json: ["pushToken": token, "environment": "production", "bundleId": bundle])
            #expect(reply.status == status, "\(bundle): \(String(decoding: reply.body, as: UTF8.self))")
        }
        #expect(
            try api.send("PUT", path, as: order.token, json: ["pushToken": token, "environment": "production"]).status
                == 200)
    }
}

@Suite("Dead letters over the API")
struct DeadLetterAPITests {
    /// A push that died is listed with its reason and, after a replay, is pending again.
    @Test func listAndReplay() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let order = try api.createOrder(merchant, number: "A-1")
        #expect(
            try api.send(
                "PUT", "/v1/orders/\(order.id)/activities/a", as: order.token,
                json: ["pushToken": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "environment": "production"]
            ).status == 200)
        #expect(
            try api.send("POST", "/v1/orders/\(order.id)/status", as: merchant, json: ["status": "preparing"]).status
                == 200)
        let claimed = try api.store.claimDue(owner: "test", now: api.now, lease: 30, limit: 10)
        try #require(claimed.count == 1)
        try api.store.markDead(claimed[0], reason: "TopicDisallowed", now: api.now)

        let listed = try api.send("GET", "/v1/admin/dead-letters?limit=10", as: APIHarness.adminKey)
        let letters = listed.json["deadLetters"] as? [[String: Any]] ?? []
        #expect(listed.status == 200 && letters.count == 1)
        #expect(letters.first?["reason"] as? String == "TopicDisallowed")
        #expect(letters.first?["activityId"] as? String == "a" && letters.first?["orderId"] as? String == order.id)
        #expect(try api.send("GET", "/v1/admin/dead-letters?limit=0", as: APIHarness.adminKey).status == 422)

        let replay = try api.send(
            "POST", "/v1/admin/dead-letters/replay", as: APIHarness.adminKey, json: ["ids": [claimed[0].id]])
        #expect(replay.status == 200 && replay.json["replayed"] as? Int == 1)
        #expect(try api.store.deadLetters(limit: 10).isEmpty)
        #expect(try api.store.claimDue(owner: "test", now: api.now, lease: 30, limit: 10).map(\.id) == [claimed[0].id])
    }
}

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) { current = Mutex(start) }

    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
