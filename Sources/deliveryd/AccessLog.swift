import HTTPServer
import Telemetry

/// deliveryd's access log: one JSON line per answered request on standard error, beside the
/// application's lines.
///
/// The line carries method, path (no query string), route, status, bytes, duration and request id
/// only, so no credential or private field can reach the log through it. Paths naming a customer
/// (`/v1/customers/{customerId}/…`) are logged as their route: a merchant's customer id is a
/// person's identifier.
enum AccessLog {
    static let configuration = AccessLogConfiguration(
        output: .standardError, pathsLoggedAsRoute: ["/v1/customers/"])
}
