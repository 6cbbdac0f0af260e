public import HTTPServer
public import Storage

/// The HTTP face of deliveryd: the routes and what they answer.
public struct DeliveryService: Sendable {
    private let store: any DeliveryStore

    public init(store: any DeliveryStore) {
        self.store = store
    }

    /// Every route of the service.
    public func router() -> Router {
        var router = Router()
        // Built once: liveness probes are frequent and the answer never changes.
        let healthy = HTTPResponse.json(200, Array(#"{"status":"ok"}"#.utf8))
        router.add("GET", "/healthz", execution: .inline) { _ in healthy }
        let store = self.store
        router.add("GET", "/readyz") { _ in
            do {
                _ = try store.outboxDepth()
                return .json(200, Array(#"{"status":"ready"}"#.utf8))
            } catch {
                return APIError(status: 503, code: "not_ready", message: "the database cannot be read").response
            }
        }
        return router
    }
}
