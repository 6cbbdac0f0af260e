/// A part of the process that starts, serves, and stops gracefully: the HTTP server, the push
/// workers, the webhook dispatcher, the maintenance jobs, the log writer.
///
/// A `ServiceGroup` runs each service's `run` and, when the process is to stop, calls
/// `beginShutdown` in the reverse order of start, waiting for each `run` to return before the next.
public protocol Service: Sendable {
    /// The name the group logs the service's start and stop under.
    var name: String { get }

    /// Serves until `beginShutdown` is called, then finishes the work in flight and returns.
    ///
    /// Returning or throwing before a shutdown was asked for is a failure: the group stops the
    /// other services and the process ends with an error. Implementations never block the calling
    /// thread (it belongs to Swift's cooperative pool): blocking work runs on threads of its own.
    func run() async throws

    /// Asks `run` to finish gracefully. Returns at once; may come before `run` starts, and more
    /// than once.
    func beginShutdown()
}
