import DeliveryAPI
import Foundation
import HTTPServer
import Storage
import TestSupport

/// The service over a fresh SQLite file, called through its router as the HTTP server calls it.
final class APIHarness: Sendable {
    static let adminKey = "test-admin-key-0123456789"
    let directory: String
    let store: any DeliveryStore
    let router: Router
    let now = Date()

    /// A harness over another configuration's router and store; `directory` (the store's) is removed
    /// with the harness, or else by the caller.
    init(router: Router, store: any DeliveryStore, directory: String? = nil) throws {
        self.directory = directory ?? NSTemporaryDirectory() + "api-unused-" + UUID().uuidString
        self.store = store
        self.router = router
    }

    init(
        configuration: DeliveryServiceConfiguration = DeliveryServiceConfiguration(defaultBundleID: "com.example.app")
    ) throws {
        directory = NSTemporaryDirectory() + "api-" + UUID().uuidString
        store = try TestStore.open(directory)
        try store.upsertAPIKey(Credentials.configuredAdminKey(Self.adminKey, now: now))
        let fixedNow = now
        router = DeliveryService(store: store, configuration: configuration, clock: { fixedNow }).router()
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    struct Reply {
        let status: Int
        let headers: [(name: String, value: String)]
        let body: [UInt8]

        /// The body as a JSON object (empty for no body).
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        }

        var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
        /// `validation_failed`'s problems by field.
        var fieldProblems: [String: String] {
            let details = (json["error"] as? [String: Any])?["details"] as? [String: Any]
            let fields = details?["fields"] as? [[String: Any]] ?? []
            let pairs = fields.compactMap { entry -> (String, String)? in
                guard let field = entry["field"] as? String else { return nil }
                return (field, entry["problem"] as? String ?? "")
            }
            return Dictionary(pairs, uniquingKeysWith: { first, _ in first })
        }

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// Sends one request; `body` is serialized as JSON unless it is raw bytes.
    @discardableResult
    func send(
        _ method: String, _ path: String, as credential: String? = nil, json body: Any? = nil,
        headers: [(name: String, value: String)] = [], from address: String? = nil
    ) throws -> Reply {
        var allHeaders = headers
        if let credential { allHeaders.append(("Authorization", "Bearer " + credential)) }
        var bytes: [UInt8] = []
        if let body {
            bytes = Array(try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))
            allHeaders.append(("Content-Type", "application/json"))
        }
        var request = HTTPRequest(method: method, path: path, headers: allHeaders, body: bytes)
        request.clientAddress = address
        return dispatch(request)
    }

    /// The answer the event loop would give from memory (see `Router.MemoryHandler`); `nil` when
    /// the route would hand the request to its pooled handler.
    func sendFromMemory(_ method: String, _ path: String, as credential: String, json body: Any? = nil) -> Reply? {
        var headers = [("Authorization", "Bearer " + credential)]
        var bytes: [UInt8] = []
        if let body, let data = try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]) {
            bytes = Array(data)
            headers.append(("Content-Type", "application/json"))
        }
        var request = HTTPRequest(method: method, path: path, headers: headers, body: bytes)
        Self.splitQuery(&request)
        guard
            case .found(_, let parameters, .fromMemory(let attempt), _) = router.resolve(
                method: request.method, path: request.path)
        else { return nil }
        request.pathParameters = parameters
        return attempt(request).map { Reply(status: $0.status, headers: $0.headers, body: $0.body) }
    }

    private static func splitQuery(_ request: inout HTTPRequest) {
        let parts = request.path.split(separator: "?", maxSplits: 1)
        request.path = String(parts[0])
        request.query = parts.count > 1 ? String(parts[1]) : nil
    }

    func dispatch(_ request: HTTPRequest) -> Reply {
        var request = request
        Self.splitQuery(&request)
        switch router.resolve(method: request.method, path: request.path) {
        case .found(let handler, let parameters, _, _):
            request.pathParameters = parameters
            let response = handler(request)
            return Reply(status: response.status, headers: response.headers, body: response.body)
        case .notFound: return Reply(status: 404, headers: [], body: [])
        case .methodNotAllowed: return Reply(status: 405, headers: [], body: [])
        }
    }

    /// A new API key of a role; returns the key.
    func key(_ role: String, merchant: String? = nil, rider: String? = nil) throws -> String {
        var body: [String: Any] = ["role": role]
        if let merchant { body["merchantId"] = merchant }
        if let rider { body["riderId"] = rider }
        let reply = try send("POST", "/v1/admin/keys", as: Self.adminKey, json: body)
        guard reply.status == 201, let key = reply.json["key"] as? String else {
            throw HarnessError("key creation failed: \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
        }
        return key
    }

    /// A customer credential minted by `merchantKey` for one of its customers.
    func customerCredential(_ merchantKey: String, customer: String) throws -> (id: String, credential: String) {
        let reply = try send("POST", "/v1/customers/\(customer)/credentials", as: merchantKey, json: [String: Any]())
        guard reply.status == 201, let id = reply.json["id"] as? String,
            let credential = reply.json["credential"] as? String
        else {
            throw HarnessError("minting failed: \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
        }
        return (id, credential)
    }

    /// Creates an order as `merchantKey`; returns its id and tracking token.
    func createOrder(_ merchantKey: String, number: String, customer: String = "c-42") throws -> (
        id: String, token: String
    ) {
        let reply = try send(
            "POST", "/v1/orders", as: merchantKey, json: Self.orderBody(number: number, customer: customer, now: now))
        guard reply.status == 201, let order = reply.json["order"] as? [String: Any], let id = order["id"] as? String,
            let token = reply.json["trackingToken"] as? String
        else {
            throw HarnessError("order creation failed: \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
        }
        return (id, token)
    }

    static func orderBody(number: String, customer: String = "c-42", now: Date) -> [String: Any] {
        [
            "number": number, "merchantName": "Pizza Roma",
            "items": [["name": "Margherita", "quantity": 2, "price": 8.5]],
            "customer": ["id": customer, "name": "Ana", "phone": "+49 30 1234567", "locale": "de-DE"],
            "address": "Hauptstr. 1, 10115 Berlin", "payment": ["method": "card", "brand": "visa", "last4": "4242"],
            "estimatedArrival": rfc3339(now.addingTimeInterval(1800)), "note": "ring twice",
        ]
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    /// An RFC 3339 time as the API writes it (milliseconds) or as tests send it (whole seconds).
    static func parseTime(_ text: String) -> Date? {
        (try? Date(text, strategy: .iso8601.time(includingFractionalSeconds: true)))
            ?? (try? Date(text, strategy: .iso8601))
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
