package import Foundation

/// The operations `docs/openapi.yaml` documents, read without a YAML library: path keys are indented
/// two spaces under `paths:`, their operations four.
package enum OpenAPIOperations {
    package static var documentURL: URL {
        APNsSimulator.repositoryRoot.appendingPathComponent("docs/openapi.yaml")
    }

    /// `METHOD /path` of every operation of the document.
    package static func all() throws -> Set<String> {
        parse(try String(contentsOf: documentURL, encoding: .utf8))
    }

    package static func parse(_ text: String) -> Set<String> {
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
