import HTTPServer
import Telemetry

/// The version deliveryd reports in logs and `deliveryd_build_info`.
let deliverydVersion = "0.3.0"

/// One structured line per answered request.
///
/// The entry carries method, path (no query string), route, status, bytes, duration and request id
/// only, so no credential or private field can reach the log through it. Paths naming a customer
/// (`/v1/customers/{customerId}/…`) are logged as their route: a merchant's customer id is a
/// person's identifier.
enum AccessLog {
    static func write(_ entry: AccessLogEntry, to logger: Logger) {
        var fields: [String: Logger.Value] = [
            "request.id": .string(entry.requestID), "http.request.method": .string(entry.method),
            "url.path": .string(Self.loggedPath(entry)), "http.response.status_code": .int(entry.status),
            "http.response.size": .int(entry.bytes), "http.server.request.duration": .number(entry.durationSeconds),
        ]
        if let route = entry.route { fields["http.route"] = .string(route) }
        logger.info("http.request", fields)
    }

    static func loggedPath(_ entry: AccessLogEntry) -> String {
        if entry.path.hasPrefix("/v1/customers/") { return entry.route ?? "/v1/customers/…" }
        return entry.path
    }
}
