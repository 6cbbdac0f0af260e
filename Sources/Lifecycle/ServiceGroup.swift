import Synchronization
public import Telemetry

/// Runs the process's services: starts them in order, and stops them in reverse order when asked
/// (a signal) or when one of them fails, each within its own stop timeout.
///
/// Concurrency: each service's `run` is a task of its own; the group itself only awaits events (a
/// service returned, a stop was asked for, a stop timeout passed) from one stream, so it never holds
/// a thread.
public final class ServiceGroup: Sendable {
    /// A service and how long its graceful stop may take before the group moves on without it.
    public struct Member: Sendable {
        public let service: any Service
        public let stopTimeout: Duration

        public init(_ service: any Service, stopTimeout: Duration) {
            self.service = service
            self.stopTimeout = stopTimeout
        }
    }

    /// How the group ended.
    public struct Outcome: Sendable, Equatable {
        /// The services that returned or threw before a shutdown was asked for, in the order they did.
        public var failed: [String] = []
        /// The services still running when their stop timeout passed.
        public var timedOut: [String] = []

        /// Whether the group stopped because it was asked to, every service in time.
        public var isClean: Bool { failed.isEmpty && timedOut.isEmpty }
    }

    private enum Event: Sendable {
        case shutdownRequested(reason: String)
        case finished(index: Int, error: String?)
        case stopTimedOut(index: Int)
    }

    private let members: [Member]
    private let logger: Logger
    private let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    public init(_ members: [Member], logger: Logger) {
        self.members = members
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: Event.self)
    }

    /// Asks the group to stop its services; `reason` goes to the log. Returns at once; safe to call
    /// from any thread, before `run`, and more than once.
    public func shutdown(reason: String) {
        eventSink.yield(.shutdownRequested(reason: reason))
    }

    /// Starts every service in order and returns once all have stopped (or passed their stop timeout).
    /// Call it once.
    /// - Parameter whenStarted: called once every service's `run` has begun (their setup, binding a
    ///   port, is done by then): the moment to tell a supervisor the process is ready.
    public func run(whenStarted: () -> Void = {}) async -> Outcome {
        var outcome = Outcome()
        var running = Set(members.indices)
        for (index, member) in members.enumerated() {
            logger.info("service.starting", ["service.name": .string(member.service.name)])
            let sink = eventSink
            Task {
                do {
                    try await member.service.run()
                    sink.yield(.finished(index: index, error: nil))
                } catch {
                    sink.yield(.finished(index: index, error: "\(error)"))
                }
            }
        }
        whenStarted()
        var iterator = events.makeAsyncIterator()
        // Serving: until a stop is asked for or a service ends by itself.
        serving: while let event = await iterator.next() {
            switch event {
            case .shutdownRequested(let reason):
                logger.info("service.stopping", ["reason": .string(reason)])
                break serving
            case .finished(let index, let error):
                running.remove(index)
                let name = members[index].service.name
                outcome.failed.append(name)
                var fields: [String: Logger.Value] = ["service.name": .string(name)]
                if let error { fields["error"] = .string(error) }
                logger.error("service.failed", fields)
                logger.info("service.stopping", ["reason": .string("\(name) failed")])
                break serving
            case .stopTimedOut: continue
            }
        }
        // Stopping: the last started first, each given its own timeout.
        for index in members.indices.reversed() where running.contains(index) {
            let member = members[index]
            member.service.beginShutdown()
            let sink = eventSink
            let timer = Task {
                try await Task.sleep(for: member.stopTimeout)
                sink.yield(.stopTimedOut(index: index))
            }
            waiting: while let event = await iterator.next() {
                switch event {
                case .finished(let finished, let error):
                    running.remove(finished)
                    if let error {
                        logger.error(
                            "service.failed",
                            ["service.name": .string(members[finished].service.name), "error": .string(error)])
                        outcome.failed.append(members[finished].service.name)
                    }
                    if finished == index {
                        logger.info("service.stopped", ["service.name": .string(member.service.name)])
                        break waiting
                    }
                case .stopTimedOut(let timedOut) where timedOut == index:
                    logger.warning(
                        "service.stop_timeout",
                        [
                            "service.name": .string(member.service.name),
                            "timeout.seconds": .number(seconds(member.stopTimeout)),
                        ])
                    outcome.timedOut.append(member.service.name)
                    break waiting
                case .shutdownRequested, .stopTimedOut: continue
                }
            }
            timer.cancel()
        }
        eventSink.finish()
        return outcome
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
