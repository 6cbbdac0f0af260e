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

    /// Any route with a credential can answer 400 (two `Authorization` headers), 401 and 429 (a rate
    /// limit): each such operation says so, so that a client generated from the document expects them.
    @Test func everySecuredOperationDocumentsTheAnswersOfItsCredential() throws {
        let operations = try OpenAPIOperations.operations()
        #expect(operations.count == (try OpenAPIOperations.all()).count)
        #expect(operations.values.contains { !$0.isSecured })
        for (name, operation) in operations where operation.isSecured {
            let missing = Set(["400", "401", "429"]).subtracting(operation.statuses)
            #expect(missing.isEmpty, "\(name) does not document \(missing.sorted())")
        }
    }

    /// The document's error codes are the service's one table, the HTTP layer's refusals included.
    @Test func documentedErrorCodesAreTheTable() throws {
        #expect(try OpenAPIOperations.errorCodes() == ErrorCode.all.map(\.rawValue))
    }
}
