import Foundation
import TestScheduling
import TestSupport
import Testing

/// Every route of `docs/openapi.yaml`, sent hostile input over real sockets to the real binary: no
/// request may trap (a trap in one handler stops the service for everyone) or answer 5xx.
@Suite("Hostile input: no request crashes the process", .serialized, .heavy)
struct HostileInputTests {
    static let adminKey = "hostile-admin-key-0123456789"

    /// Values that broke parsers and conversions before: numbers no integer holds, fractions,
    /// wrong types, empty and huge strings, control characters, nesting below and above the limit.
    static var hostileValues: [Any] {
        [
            1e300, -1e300, 9_223_372_036_854_775_808.0, -9_223_372_036_854_775_809.0, 1.5, -1, 0, 4_294_967_296, "",
            String(repeating: "x", count: 65_536), "\u{0}\u{1}\u{7F}", "ü🍕中", true, NSNull(), [Any](), [String: Any](),
            nested(31), nested(33), [1e300, -1, "x"],
        ]
    }

    static func nested(_ depth: Int) -> Any {
        var value: Any = 1
        for _ in 0..<depth { value = [value] }
        return value
    }

    /// A sample request per documented operation, with what the fields should look like.
    struct Sample {
        let operation: String
        let path: String
        let body: [String: Any]?
        let bearer: String
    }

    @Test func everyRouteAndFieldSurvivesHostileValues() throws {
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"] + DeliverydProcess.crowdArguments)
        defer { _ = server.stop() }
        let port = server.port
        try LoopbackHTTP.waitUntilHealthy(port: port)
        func call(_ method: String, _ path: String, _ bearer: String, _ body: Any?) throws -> LoopbackHTTP.Response {
            try LoopbackHTTP.send(port: port, method, path, bearer: bearer, json: body)
        }
        let merchant =
            try call("POST", "/v1/admin/keys", Self.adminKey, ["role": "merchant", "merchantId": "m-1"])
            .json["key"] as? String ?? ""
        let spare =
            try call("POST", "/v1/admin/keys", Self.adminKey, ["role": "rider", "merchantId": "m-1", "riderId": "r-9"])
            .json["id"] as? String ?? ""
        let rider =
            try call("POST", "/v1/admin/keys", Self.adminKey, ["role": "rider", "merchantId": "m-1", "riderId": "r-1"])
            .json["key"] as? String ?? ""
        let eta = Date().addingTimeInterval(1800)
        let created = try call(
            "POST", "/v1/orders", merchant, EndToEndTests.orderBody("H-1", customer: "c-1", eta: eta))
        let order = (created.json["order"] as? [String: Any])?["id"] as? String ?? ""
        let tracking = created.json["trackingToken"] as? String ?? ""
        let account = try call("POST", "/v1/customers/c-1/credentials", merchant, [String: Any]())
        let credential = account.json["credential"] as? String ?? ""
        try #require(!order.isEmpty && !tracking.isEmpty && !credential.isEmpty)
        let webhooks = try (0..<2).map { index in
            try call("POST", "/v1/webhooks", merchant, ["url": "https://hooks.example.com/\(index)"]).json["id"]
                as? String ?? ""
        }
        try #require(webhooks.allSatisfy { !$0.isEmpty })

        let token = ["pushToken": String(repeating: "ab", count: 32), "environment": "production"]
        let position: [String: Any] = [
            "latitude": 48.2, "longitude": 11.6, "accuracy": 12, "recordedAt": EndToEndTests.rfc3339(Date()),
        ]
        let samples = [
            Sample(operation: "GET /healthz", path: "/healthz", body: nil, bearer: merchant),
            Sample(operation: "GET /readyz", path: "/readyz", body: nil, bearer: merchant),
            Sample(
                operation: "POST /v1/orders", path: "/v1/orders",
                body: EndToEndTests.orderBody("H-2", customer: "c-2", eta: eta)
                    + ["destination": ["latitude": 48.1, "longitude": 11.5]], bearer: merchant),
            Sample(operation: "GET /v1/orders/{id}", path: "/v1/orders/\(order)", body: nil, bearer: merchant),
            Sample(
                operation: "POST /v1/orders/{id}/status", path: "/v1/orders/\(order)/status",
                body: ["status": "preparing", "estimatedArrival": EndToEndTests.rfc3339(eta), "reason": "r"],
                bearer: merchant),
            Sample(
                operation: "PATCH /v1/orders/{id}/eta", path: "/v1/orders/\(order)/eta",
                body: ["estimatedArrival": EndToEndTests.rfc3339(eta)], bearer: merchant),
            Sample(
                operation: "PUT /v1/orders/{id}/rider", path: "/v1/orders/\(order)/rider",
                body: ["riderId": "r-1", "name": "Marco Rossi", "phone": "+39 1"], bearer: merchant),
            Sample(
                operation: "POST /v1/orders/{id}/position", path: "/v1/orders/\(order)/position",
                body: position + ["positions": [position, position]], bearer: rider),
            Sample(
                operation: "POST /v1/riders/{riderId}/position", path: "/v1/riders/r-1/position", body: position,
                bearer: rider),
            Sample(
                operation: "GET /v1/orders/{id}/live-activity", path: "/v1/orders/\(order)/live-activity", body: nil,
                bearer: tracking),
            Sample(
                operation: "POST /v1/orders/{id}/live-activity/start", path: "/v1/orders/\(order)/live-activity/start",
                body: nil, bearer: merchant),
            Sample(
                operation: "POST /v1/orders/{id}/tracking-token", path: "/v1/orders/\(order)/tracking-token",
                body: nil, bearer: merchant),
            Sample(
                operation: "GET /v1/orders/{id}/pushes", path: "/v1/orders/\(order)/pushes", body: nil, bearer: merchant
            ),
            Sample(
                operation: "PUT /v1/orders/{id}/activities/{activityId}", path: "/v1/orders/\(order)/activities/a",
                body: (token as [String: Any])
                    + [
                        "bundleId": "com.example.app",
                        "contentState": [
                            "status": "placed", "stage": 0, "progress": 0, "statusText": "Order placed",
                            "estimatedArrival": 817_907_400, "riderName": "Marco",
                        ],
                    ], bearer: tracking),
            Sample(
                operation: "DELETE /v1/orders/{id}/activities/{activityId}", path: "/v1/orders/\(order)/activities/a",
                body: nil, bearer: tracking),
            Sample(
                operation: "POST /v1/customers/{customerId}/credentials", path: "/v1/customers/c-1/credentials",
                body: ["merchantId": "m-1"], bearer: Self.adminKey),
            Sample(
                operation: "DELETE /v1/customers/{customerId}/credentials/{credentialId}",
                path: "/v1/customers/c-1/credentials/c000000000000", body: nil, bearer: merchant),
            Sample(
                operation: "PUT /v1/customers/{customerId}/push-to-start/{deviceId}",
                path: "/v1/customers/c-1/push-to-start/d-1", body: token, bearer: credential),
            Sample(
                operation: "DELETE /v1/customers/{customerId}/push-to-start/{deviceId}",
                path: "/v1/customers/c-1/push-to-start/d-9", body: nil, bearer: credential),
            Sample(
                operation: "POST /v1/admin/keys", path: "/v1/admin/keys",
                body: ["role": "merchant", "merchantId": "m-7", "riderId": "r-7"], bearer: Self.adminKey),
            Sample(operation: "GET /v1/admin/keys", path: "/v1/admin/keys", body: nil, bearer: Self.adminKey),
            Sample(
                operation: "DELETE /v1/admin/merchants/{merchantId}/customers/{customerId}/personal-data",
                path: "/v1/admin/merchants/m-1/customers/%C2%84%00%FF/personal-data", body: nil, bearer: Self.adminKey),
            Sample(
                operation: "DELETE /v1/admin/keys/{id}", path: "/v1/admin/keys/\(spare)", body: nil,
                bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/admin/dead-letters", path: "/v1/admin/dead-letters?limit=99999999999999999999",
                body: nil, bearer: Self.adminKey),
            Sample(
                operation: "POST /v1/admin/dead-letters/replay", path: "/v1/admin/dead-letters/replay",
                body: ["ids": [1, 2]], bearer: Self.adminKey),
            Sample(operation: "GET /metrics", path: "/metrics", body: nil, bearer: Self.adminKey),
            Sample(operation: "GET /v1/admin/stats", path: "/v1/admin/stats", body: nil, bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/admin/stats", path: "/v1/admin/stats?historySince=-99999999999999999999",
                body: nil, bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/admin/stats", path: "/v1/admin/stats?history=all&history=%FF", body: nil,
                bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/orders/{id}/timeline", path: "/v1/orders/\(order)/timeline", body: nil,
                bearer: merchant),
            Sample(
                operation: "GET /v1/admin/orders", path: "/v1/admin/orders?q=%FF%FE%00", body: nil,
                bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/admin/orders",
                path: "/v1/admin/orders?q=\(String(repeating: "%41", count: 4_000))", body: nil,
                bearer: Self.adminKey),
            Sample(operation: "GET /admin", path: "/admin", body: nil, bearer: Self.adminKey),
            Sample(
                operation: "POST /v1/webhooks", path: "/v1/webhooks",
                body: ["url": "https://hooks.example.com/in", "eventTypes": ["order.status_changed"]], bearer: merchant),
            Sample(
                operation: "GET /v1/webhooks", path: "/v1/webhooks?merchantId=%FF", body: nil, bearer: Self.adminKey),
            Sample(
                operation: "GET /v1/webhooks/{id}", path: "/v1/webhooks/\(webhooks[0])", body: nil, bearer: merchant),
            Sample(
                operation: "PATCH /v1/webhooks/{id}", path: "/v1/webhooks/\(webhooks[0])",
                body: ["url": "https://hooks.example.com/2", "description": "d", "enabled": true, "eventTypes": []],
                bearer: merchant),
            Sample(
                operation: "POST /v1/webhooks/{id}/rotate-secret", path: "/v1/webhooks/\(webhooks[0])/rotate-secret",
                body: ["graceSeconds": 60], bearer: merchant),
            Sample(
                operation: "GET /v1/webhooks/{id}/attempts", path: "/v1/webhooks/\(webhooks[0])/attempts?limit=-1",
                body: nil, bearer: merchant),
            Sample(
                operation: "POST /v1/webhooks/{id}/replay", path: "/v1/webhooks/\(webhooks[0])/replay",
                body: ["since": EndToEndTests.rfc3339(Date().addingTimeInterval(-60))], bearer: merchant),
            Sample(
                operation: "DELETE /v1/webhooks/{id}", path: "/v1/webhooks/\(webhooks[1])", body: nil, bearer: merchant),
        ]
        #expect(Set(samples.map(\.operation)) == (try OpenAPIOperations.all()), "a documented route has no sample")

        var cases = 0
        var failures: [String] = []
        func check(_ sample: Sample, _ label: String, _ response: () throws -> LoopbackHTTP.Response) {
            cases += 1
            do {
                let answer = try response()
                if answer.status >= 500 {
                    failures.append("\(sample.operation) \(label): \(answer.status) \(answer.text)")
                }
            } catch {
                failures.append("\(sample.operation) \(label): no answer (\(error))")
            }
        }
        for sample in samples {
            let method = String(sample.operation.split(separator: " ")[0])
            for (label, body) in Self.mutations(of: sample.body ?? [:]) {
                check(sample, label) { try call(method, sample.path, sample.bearer, body) }
            }
            // Whole bodies no JSON parser should choke on: not UTF-8, cut short, nested past the
            // limit and far past it, the wrong top-level type, a body on a GET.
            let raw: [(String, [UInt8])] = [
                ("not UTF-8", [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]),
                ("cut short", Array(#"{"status": "pick"#.utf8)),
                (
                    "nested 300 deep",
                    Array((String(repeating: "[", count: 300) + String(repeating: "]", count: 300)).utf8)
                ),
                (
                    "objects nested 5000 deep",
                    Array((String(repeating: #"{"a":"#, count: 5000) + "1" + String(repeating: "}", count: 5000)).utf8)
                ),
                ("top-level array", Array("[1,2,3]".utf8)),
                ("huge number", Array(#"{"status": 1e99999}"#.utf8)),
            ]
            for (label, bytes) in raw {
                check(sample, label) {
                    try LoopbackHTTP.send(
                        port: port, method, sample.path,
                        headers: ["Authorization": "Bearer \(sample.bearer)", "Content-Type": "application/json"],
                        body: Data(bytes))
                }
            }
            // Path parameters: long, odd and escaped.
            for odd in [String(repeating: "p", count: 2_000), "%00", "..%2F..", "%F0%9F%8D%95", "a:b.c-d_e"] {
                let path = sample.path.replacingOccurrences(of: order, with: odd)
                    .replacingOccurrences(of: "/c-1/", with: "/\(odd)/")
                check(sample, "path \(odd.prefix(12))") { try call(method, path, sample.bearer, sample.body) }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(cases) cases failed: \(failures.prefix(5))")
        #expect(try LoopbackHTTP.send(port: port, "GET", "/healthz").status == 200, "the process died")
        #expect(server.stop() == 0)
        print("hostile input: \(cases) requests over \(samples.count) routes, \(failures.count) 5xx or unanswered")
    }

    /// The body with each field (at every depth) replaced by each hostile value, one at a time, and
    /// with an unknown field added.
    static func mutations(of body: [String: Any]) -> [(String, Any)] {
        var result: [(String, Any)] = [("as is", body), ("unknown field", body + ["zzz": hostileValues])]
        func walk(_ value: Any, _ path: [String], _ replace: @escaping (Any) -> Any) {
            for (index, hostile) in hostileValues.enumerated() {
                result.append(("\(path.joined(separator: ".")) = #\(index)", replace(hostile)))
            }
            if let object = value as? [String: Any] {
                for (key, member) in object {
                    walk(member, path + [key]) { replacement in
                        var copy = object
                        copy[key] = replacement
                        return replace(copy)
                    }
                }
            } else if let array = value as? [Any], let first = array.first {
                walk(first, path + ["0"]) { replacement in
                    var copy = array
                    copy[0] = replacement
                    return replace(copy)
                }
            }
        }
        for (key, member) in body {
            walk(member, [key]) { replacement in body + [key: replacement] }
        }
        return result
    }
}

extension Dictionary where Key == String, Value == Any {
    fileprivate static func + (lhs: Self, rhs: Self) -> Self { lhs.merging(rhs) { _, new in new } }
}
