/// Why the domain refused a request; the API maps each code to an HTTP status in one place.
///
/// Equality compares codes only, so tests and callers match on what never changes.
public struct OrderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable snake_case code that clients may depend on.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case illegalTransition = "illegal_transition"
            case orderClosed = "order_closed"
            case forbidden
            case notFound = "not_found"
            case validationFailed = "validation_failed"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The requested status comes before the current one.
        public static let illegalTransition = Code(.illegalTransition)
        /// The order is delivered or cancelled and takes no other change.
        public static let orderClosed = Code(.orderClosed)
        /// The caller may see the order but not make this change.
        public static let forbidden = Code(.forbidden)
        /// The caller may not even know that the order exists.
        public static let notFound = Code(.notFound)
        /// The input broke one or more field rules, listed in `fieldIssues`.
        public static let validationFailed = Code(.validationFailed)

        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }
    }

    public let code: Code
    public let message: String
    /// The order's status when the request was refused, for `illegal_transition` and `order_closed`.
    public let currentStatus: OrderStatus?
    /// Every field that failed validation, in the order they were checked.
    public let fieldIssues: [FieldIssue]

    public init(_ code: Code, _ message: String, currentStatus: OrderStatus? = nil, fieldIssues: [FieldIssue] = []) {
        self.code = code
        self.message = message
        self.currentStatus = currentStatus
        self.fieldIssues = fieldIssues
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: OrderError, rhs: OrderError) -> Bool { lhs.code == rhs.code }
}

/// One broken rule of one input field, named by its JSON path (`customer.phone`, `items[2].quantity`).
public struct FieldIssue: Sendable, Hashable, CustomStringConvertible {
    public let field: String
    public let problem: String

    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }

    public var description: String { "\(field): \(problem)" }
}
