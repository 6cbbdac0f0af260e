import DeliveryAPI
import Foundation
import HTTPServer
import Testing

@Suite("docs/openapi.yaml")
struct OpenAPITests {
    /// The documented operations and the router's routes are the same set of (method, path).
    @Test func documentedPathsAreTheRoutes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
        let documented = Self.operations(inYAML: text)
        let api = try APIHarness()
        let routed = Set(api.router.registeredRoutes.map { "\($0.method) \($0.pattern)" })
        #expect(documented.count > 10)
        #expect(documented.subtracting(routed).isEmpty, "documented but not routed")
        #expect(routed.subtracting(documented).isEmpty, "routed but not documented")
    }

    /// `METHOD /path` of every operation under `paths:`: path keys are indented two spaces,
    /// their operations four.
    static func operations(inYAML text: String) -> Set<String> {
        let methods: Set<String> = ["get", "put", "post", "patch", "delete"]
        var operations = Set<String>()
        var inPaths = false
        var currentPath: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty {
                inPaths = line == "paths:"
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let currentPath {
                let key = line.dropFirst(4).prefix { $0 != ":" }
                if methods.contains(String(key)) { operations.insert("\(key.uppercased()) \(currentPath)") }
            }
        }
        return operations
    }
}
