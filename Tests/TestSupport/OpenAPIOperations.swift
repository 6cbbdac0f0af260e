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

    /// One operation as the document states it: whether it needs a credential, and its statuses.
    package struct Operation: Sendable {
        package var isSecured = true
        package var statuses: Set<String> = []
    }

    /// Every operation by `METHOD /path`, with `security: []` and the `"NNN":` keys of its responses.
    package static func operations() throws -> [String: Operation] {
        let methods: Set<String> = ["get", "put", "post", "patch", "delete"]
        var operations: [String: Operation] = [:]
        var inPaths = false
        var currentPath: String?
        var current: String?
        for line in try String(contentsOf: documentURL, encoding: .utf8).split(separator: "\n") {
            if !line.hasPrefix(" ") {
                inPaths = line == "paths:"
                current = nil
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
                current = nil
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let currentPath {
                let key = String(line.dropFirst(4).prefix { $0 != ":" })
                current = methods.contains(key) ? "\(key.uppercased()) \(currentPath)" : nil
                if let current { operations[current] = Operation() }
            } else if let current {
                let trimmed = line.drop { $0 == " " }
                if trimmed == "security: []" { operations[current]?.isSecured = false }
                if line.hasPrefix("        \""), !line.hasPrefix("         ") {
                    operations[current]?.statuses.insert(String(trimmed.dropFirst().prefix(3)))
                }
            }
        }
        return operations
    }

    /// The `enum` of the `Error` schema's `code`: every error code the document promises.
    package static func errorCodes() throws -> [String] {
        let text = try String(contentsOf: documentURL, encoding: .utf8)
        guard let schema = text.range(of: "    Error:\n"),
            let list = text.range(of: "enum: [", range: schema.upperBound..<text.endIndex),
            let end = text.range(of: "]", range: list.upperBound..<text.endIndex)
        else { return [] }
        return text[list.upperBound..<end.lowerBound].split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
