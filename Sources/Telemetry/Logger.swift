public import Foundation
import JSONSyntax

#if canImport(Glibc)
    import Glibc
#endif

/// Structured logs: one JSON object per line on standard error, `time`, `level`, `message`, then
/// dotted lowercase fields (`order.id`, `apns.reason`, `request.id`).
///
/// Messages are constant strings and values go in fields, so lines can be grepped and aggregated.
/// Callers never put tokens in full (a short prefix at most), keys, or an order's private fields in a
/// field: this type cannot know them, the call sites are written not to.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        case debug
        case info
        case warning
        case error

        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// A field value: text or a number.
    public enum Value: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
        case string(String)
        case number(Double)

        public init(stringLiteral value: String) { self = .string(value) }
        public init(integerLiteral value: Int) { self = .number(Double(value)) }
        public static func int(_ value: Int) -> Value { .number(Double(value)) }
    }

    public let label: String
    public var minimumLevel: Level
    /// Fields added to every line of this logger (e.g. `component`).
    public var metadata: [String: Value]
    private let sink: @Sendable (String) -> Void

    /// - Parameters:
    ///   - label: the component, written as `logger`.
    ///   - sink: where finished lines go; default standard error through `LogOutput.standardError`,
    ///     which never blocks the caller (errors wait until they are written, so that they are in the
    ///     log before whatever follows them).
    public init(
        label: String, minimumLevel: Level = .info, metadata: [String: Value] = [:],
        sink: @escaping @Sendable (String) -> Void = Logger.writeToStandardError
    ) {
        self.label = label
        self.minimumLevel = minimumLevel
        self.metadata = metadata
        self.sink = sink
    }

    public func debug(_ message: String, _ fields: [String: Value] = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [String: Value] = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [String: Value] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: Value] = [:]) { log(.error, message, fields) }

    public func log(_ level: Level, _ message: String, _ fields: [String: Value]) {
        guard level >= minimumLevel else { return }
        sink(
            Self.line(
                time: Date(), level: level, label: label, message: message,
                fields: metadata.isEmpty ? fields : metadata.merging(fields) { $1 }))
        if level >= .error { LogOutput.standardError.flush() }
    }

    /// The JSON text of one line, fields in sorted order after the fixed ones.
    public static func line(time: Date, level: Level, label: String, message: String, fields: [String: Value]) -> String
    {
        var line = "{\"time\":\"" + RFC3339Time.format(time) + "\""
        line += ",\"level\":\"\(level)\",\"logger\":\(quoted(label)),\"message\":\(quoted(message))"
        for key in fields.keys.sorted() {
            line += "," + quoted(key) + ":"
            switch fields[key]! {
            case .string(let text): line += quoted(text)
            case .number(let number):
                line += number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : "\(number)"
            }
        }
        return line + "}\n"
    }

    /// A JSON string literal (`JSONText`'s quoting).
    public static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        JSONText.appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Sendable public static func writeToStandardError(_ line: String) {
        LogOutput.standardError.submit(line: line)
    }
}
