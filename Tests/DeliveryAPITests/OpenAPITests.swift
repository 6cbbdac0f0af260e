import DeliveryAPI
import Foundation
import HTTPServer
import TestSupport
import Testing

@Suite("docs/openapi.yaml")
struct OpenAPITests {
    /// The documented operations and the router's routes are the same set of (method, path).
    @Test func documentedPathsAreTheRoutes() throws {
        let documented = try OpenAPIOperations.all()
        let api = try APIHarness()
        let routed = Set(api.router.registeredRoutes.map { "\($0.method) \($0.pattern)" })
        #expect(documented.count > 10)
        #expect(documented.subtracting(routed).isEmpty, "documented but not routed")
        #expect(routed.subtracting(documented).isEmpty, "routed but not documented")
    }
}
