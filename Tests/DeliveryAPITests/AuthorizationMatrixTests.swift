import Foundation
import HTTPServer
import Testing

/// Who calls, relative to one order: placed by merchant m-1 for its customer c-42, assigned to rider r-1.
enum Role: String, CaseIterable, Sendable {
    case none
    case wrongMerchant
    case wrongRider
    case otherCustomer
    case ownerMerchant
    case ownerRider
    case customer
    case admin
    /// The customer credential m-1 minted for c-42 (what the customer's app holds).
    case customerAccount
    /// The customer credential m-2 minted for its own customer c-42: another tenant, same customer id.
    case otherTenantCustomer
    /// A credential of no known shape, or of a known prefix with nothing behind it.
    case malformed
    /// m-2's own rider named r-1: the owner rider's id under another merchant, which reaches nothing of m-1's.
    case otherMerchantRider
}

/// One endpoint of the matrix with the status every role must get.
struct MatrixRow: Sendable, CustomTestStringConvertible {
    let method: String
    let path: String
    let body: @Sendable (Role) -> [String: String]?
    let expected: [Role: Int]

    var testDescription: String { "\(method) \(path)" }

    init(
        _ method: String, _ path: String, body: @escaping @Sendable (Role) -> [String: String]? = { _ in nil },
        _ statuses: [Int]
    ) {
        self.method = method
        self.path = path
        self.body = body
        self.expected = Dictionary(uniqueKeysWithValues: zip(Role.allCases, statuses))
    }
}

let pushToken = "00112233445566778899aabbccddeeff"

//                               none wrongM wrongR otherC ownerM ownerR cust admin custA otherT malformed otherMR
let matrix: [MatrixRow] = [
    MatrixRow("GET", "/v1/orders/{order}", [401, 404, 404, 404, 200, 200, 200, 200, 200, 404, 401, 404]),
    MatrixRow(
        "POST", "/v1/orders/{order}/status", body: { _ in ["status": "pickup"] },
        [401, 404, 404, 404, 200, 200, 403, 200, 403, 404, 401, 404]),
    MatrixRow(
        "PATCH", "/v1/orders/{order}/eta", body: { _ in ["estimatedArrival": "{eta}"] },
        [401, 404, 404, 404, 200, 200, 403, 200, 403, 404, 401, 404]),
    MatrixRow(
        "PUT", "/v1/orders/{order}/rider", body: { _ in ["riderId": "r-1", "name": "Marco Rossi"] },
        [401, 404, 404, 404, 200, 403, 403, 200, 403, 404, 401, 404]),
    MatrixRow("GET", "/v1/orders/{order}/live-activity", [401, 404, 404, 404, 200, 200, 200, 200, 200, 404, 401, 404]),
    MatrixRow(
        "POST", "/v1/orders/{order}/live-activity/start", [401, 404, 404, 404, 202, 403, 403, 202, 403, 404, 401, 404]
    ),
    MatrixRow(
        "POST", "/v1/orders/{order}/position",
        body: { _ in ["latitude": "#52.52", "longitude": "#13.405", "recordedAt": "{now}"] },
        [401, 404, 404, 404, 403, 202, 403, 403, 403, 404, 401, 404]),
    MatrixRow(
        "POST", "/v1/riders/r-1/position",
        body: { _ in ["latitude": "#52.52", "longitude": "#13.405", "recordedAt": "{now}"] },
        [401, 403, 403, 403, 403, 202, 403, 403, 403, 403, 401, 202]),
    MatrixRow(
        "POST", "/v1/orders/{order}/tracking-token", [401, 404, 404, 404, 201, 403, 403, 201, 403, 404, 401, 404]),
    MatrixRow("GET", "/v1/orders/{order}/pushes", [401, 404, 404, 404, 200, 403, 403, 200, 403, 404, 401, 404]),
    MatrixRow("GET", "/v1/orders/{order}/timeline", [401, 404, 404, 404, 200, 403, 403, 200, 403, 404, 401, 404]),
    MatrixRow(
        "PUT", "/v1/orders/{order}/activities/a-2",
        body: { _ in ["pushToken": pushToken, "environment": "development"] },
        [401, 403, 403, 404, 403, 403, 200, 403, 200, 404, 401, 403]),
    MatrixRow(
        "DELETE", "/v1/orders/{order}/activities/a-1", [401, 403, 403, 404, 403, 403, 204, 403, 204, 404, 401, 403]),
    // Each customer app registers its own device, under its own merchant: both tenants' c-42 may.
    MatrixRow(
        "PUT", "/v1/customers/c-42/push-to-start/d-2",
        body: { _ in ["pushToken": pushToken, "environment": "production"] },
        [401, 403, 403, 403, 403, 403, 403, 403, 200, 200, 401, 403]),
    MatrixRow(
        "PUT", "/v1/customers/c-7/push-to-start/d-2",
        body: { _ in ["pushToken": pushToken, "environment": "production"] },
        [401, 403, 403, 403, 403, 403, 403, 403, 404, 404, 401, 403]),
    // d-1 is m-1's c-42's device: the other tenant's c-42 has no such device.
    MatrixRow(
        "DELETE", "/v1/customers/c-42/push-to-start/d-1", [401, 403, 403, 403, 403, 403, 403, 403, 204, 404, 401, 403]),
    MatrixRow(
        "POST", "/v1/customers/c-42/credentials", body: { $0 == .admin ? ["merchantId": "m-1"] : [:] },
        [401, 201, 403, 403, 201, 403, 403, 201, 403, 403, 401, 403]),
    MatrixRow(
        "DELETE", "/v1/customers/c-42/credentials/{credential}",
        [401, 404, 403, 403, 204, 403, 403, 204, 403, 403, 401, 403]),
    MatrixRow(
        "POST", "/v1/orders", body: { $0 == .admin ? ["merchantId": "m-1"] : [:] },
        [401, 201, 403, 403, 201, 403, 403, 201, 403, 403, 401, 403]),
    MatrixRow(
        "POST", "/v1/admin/keys", body: { _ in ["role": "rider", "merchantId": "m-1", "riderId": "r-9"] },
        [401, 403, 403, 403, 403, 403, 403, 201, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/admin/keys", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("DELETE", "/v1/admin/keys/{spareKey}", [401, 403, 403, 403, 403, 403, 403, 204, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/admin/dead-letters", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow(
        "POST", "/v1/admin/dead-letters/replay", body: { _ in [:] },
        [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]
    ),
    MatrixRow(
        "DELETE", "/v1/admin/merchants/m-1/customers/c-42/personal-data",
        [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    // Webhook endpoints: a merchant manages its own (another merchant's is not found), an admin any.
    MatrixRow(
        "POST", "/v1/webhooks",
        body: {
            $0 == .admin
                ? ["url": "https://hooks.example.com/in", "merchantId": "m-1"] : ["url": "https://hooks.example.com/in"]
        },
        [401, 201, 403, 403, 201, 403, 403, 201, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/webhooks", [401, 200, 403, 403, 200, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/webhooks/{webhook}", [401, 404, 403, 403, 200, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow(
        "PATCH", "/v1/webhooks/{webhook}", body: { _ in ["description": "orders"] },
        [401, 404, 403, 403, 200, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("DELETE", "/v1/webhooks/{webhook}", [401, 404, 403, 403, 204, 403, 403, 204, 403, 403, 401, 403]),
    MatrixRow(
        "POST", "/v1/webhooks/{webhook}/rotate-secret", body: { _ in [:] },
        [401, 404, 403, 403, 200, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/webhooks/{webhook}/attempts", [401, 404, 403, 403, 200, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow(
        "POST", "/v1/webhooks/{webhook}/replay", body: { _ in ["eventId": "msg_unknown"] },
        [401, 404, 403, 403, 202, 403, 403, 202, 403, 403, 401, 403]),
    MatrixRow("GET", "/metrics", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/admin/stats", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/admin/stats?history=all", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/v1/admin/orders?q=1001", [401, 403, 403, 403, 403, 403, 403, 200, 403, 403, 401, 403]),
    MatrixRow("GET", "/admin", [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200]),
    MatrixRow("GET", "/healthz", [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200]),
    MatrixRow("GET", "/readyz", [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200]),
]

@Suite("Authorization matrix: every endpoint × every role")
struct AuthorizationMatrixTests {
    /// The matrix has a row for every route the service has.
    @Test func everyRouteHasARow() throws {
        let api = try APIHarness()
        let routed = Set(api.router.registeredRoutes.map { "\($0.method) \($0.pattern)" })
        let rows = Set(
            matrix.map { row in
                "\(row.method) "
                    + row.path.prefix { $0 != "?" }.split(separator: "/", omittingEmptySubsequences: false).map {
                        segment in
                        switch segment {
                        case "{order}": "{id}"
                        case "{spareKey}": "{id}"
                        case "{webhook}": "{id}"
                        case "a-1", "a-2": "{activityId}"
                        case "c-42", "c-7": "{customerId}"
                        case "d-1", "d-2": "{deviceId}"
                        case "{credential}": "{credentialId}"
                        case "r-1": "{riderId}"
                        case "m-1": "{merchantId}"
                        default: String(segment)
                        }
                    }.joined(separator: "/")
            })
        #expect(routed.subtracting(rows).isEmpty, "routes without a row: \(routed.subtracting(rows))")
    }

    /// Each endpoint answers each role with exactly the status of the matrix, on a fresh database.
    @Test(arguments: matrix)
    func endpointAnswersEachRole(_ row: MatrixRow) throws {
        for role in Role.allCases {
            let world = try World()
            var path = row.path.replacingOccurrences(of: "{order}", with: world.orderID)
            path = path.replacingOccurrences(of: "{spareKey}", with: world.spareKeyID)
            path = path.replacingOccurrences(of: "{webhook}", with: world.webhookID)
            path = path.replacingOccurrences(of: "{credential}", with: world.customerCredentialID)
            var body: [String: Any]? = row.body(role).map { fields in
                fields.mapValues { value -> Any in
                    switch value {
                    case "{eta}": APIHarness.rfc3339(world.api.now.addingTimeInterval(2400))
                    case "{now}": APIHarness.rfc3339(world.api.now)
                    // `#` marks a JSON number.
                    case _ where value.hasPrefix("#"): Double(value.dropFirst()) ?? 0
                    default: value
                    }
                }
            }
            if row.path == "/v1/orders", var orderBody = body {
                orderBody.merge(APIHarness.orderBody(number: "B-1", now: world.api.now)) { own, _ in own }
                body = orderBody
            }
            let reply = try world.api.send(row.method, path, as: world.credential(role), json: body)
            #expect(
                reply.status == row.expected[role],
                "\(row.method) \(row.path) as \(role): got \(reply.status) \(String(decoding: reply.body, as: UTF8.self))"
            )
        }
    }
}

/// The callers and the order the matrix is about.
struct World {
    let api: APIHarness
    let orderID: String
    let spareKeyID: String
    let customerCredentialID: String
    /// m-1's webhook endpoint.
    let webhookID: String
    private let credentials: [Role: String]

    init() throws {
        api = try APIHarness()
        let ownerMerchant = try api.key("merchant", merchant: "m-1")
        let ownerRider = try api.key("rider", merchant: "m-1", rider: "r-1")
        let order = try api.createOrder(ownerMerchant, number: "A-1")
        let other = try api.createOrder(ownerMerchant, number: "A-2")
        try #require(
            try api.send(
                "PUT", "/v1/orders/\(order.id)/rider", as: ownerMerchant,
                json: ["riderId": "r-1", "name": "Marco Rossi"]
            )
            .status == 200)
        try #require(
            try api.send(
                "PUT", "/v1/orders/\(order.id)/activities/a-1", as: order.token,
                json: ["pushToken": "aabbccddeeff00112233445566778899", "environment": "production"]
            ).status == 200)
        let webhook = try api.send(
            "POST", "/v1/webhooks", as: ownerMerchant, json: ["url": "https://hooks.example.com/orders"])
        webhookID = try #require(webhook.json["id"] as? String)
        let spare = try api.key("merchant", merchant: "m-3")
        spareKeyID = String(spare.split(separator: "_")[1])
        orderID = order.id
        let wrongMerchant = try api.key("merchant", merchant: "m-2")
        let account = try api.customerCredential(ownerMerchant, customer: "c-42")
        customerCredentialID = account.id
        try #require(
            try api.send(
                "PUT", "/v1/customers/c-42/push-to-start/d-1", as: account.credential,
                json: ["pushToken": "aabbccddeeff00112233445566778899", "environment": "production"]
            ).status == 200)
        credentials = [
            .customerAccount: account.credential,
            .malformed: "dc_",
            .otherTenantCustomer: try api.customerCredential(wrongMerchant, customer: "c-42").credential,
            .wrongMerchant: wrongMerchant,
            .wrongRider: try api.key("rider", merchant: "m-1", rider: "r-2"),
            .otherMerchantRider: try api.key("rider", merchant: "m-2", rider: "r-1"),
            .otherCustomer: other.token,
            .ownerMerchant: ownerMerchant,
            .ownerRider: ownerRider,
            .customer: order.token,
            .admin: APIHarness.adminKey,
        ]
    }

    func credential(_ role: Role) -> String? { credentials[role] }
}
