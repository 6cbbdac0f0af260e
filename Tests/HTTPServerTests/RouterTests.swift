import Testing

@testable import HTTPServer

@Suite("Router")
struct RouterTests {
    private func parameters(_ path: String) -> [String: String]? {
        var router = Router()
        router.add("GET", "/v1/customers/{customerId}/devices/{deviceId}") { _ in HTTPResponse(status: 204) }
        guard case .found(_, let parameters, _, _) = router.resolve(method: "GET", path: path) else { return nil }
        return parameters
    }

    @Test func pathParametersArePercentDecoded() {
        #expect(
            parameters("/v1/customers/a%3Ab/devices/%E2%82%AC")
                == ["customerId": "a:b", "deviceId": "€"])
        #expect(parameters("/v1/customers/plain/devices/x") == ["customerId": "plain", "deviceId": "x"])
    }

    /// A malformed escape or bytes that are not UTF-8 reach the handler as written, for it to refuse.
    @Test(arguments: ["%", "%4", "%zz", "%FF", "a%C3"])
    func malformedEscapesStayRaw(segment: String) {
        #expect(parameters("/v1/customers/\(segment)/devices/x")?["customerId"] == segment)
    }
}
