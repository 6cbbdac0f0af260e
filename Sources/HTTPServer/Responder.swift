internal import Dispatch
internal import Synchronization

/// How a handler that answers later (after a commit it does not wait for) sends its answer: once,
/// from any thread. The answer goes back to the connection's event loop.
///
/// A responder dropped without answering answers `500 internal` itself, so that a handler's
/// forgotten path never leaves a client waiting for its timeout.
public final class Responder: Sendable {
    private let deliver: @Sendable (HTTPResponse) -> Void
    private let answered = Atomic<Bool>(false)

    public init(_ deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.deliver = deliver
    }

    /// Sends the answer; later calls do nothing.
    public func respond(_ response: HTTPResponse) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(response)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            deliver(ResponseWriter.error(500, code: .internal, message: "the request failed"))
        }
    }

    /// The answer of `handler` to `request`, waited for on the calling thread: for callers that have
    /// a thread to block (tests, tools), not for the event loops.
    public static func waitForAnswer(
        of handler: Router.DeferredHandler, to request: HTTPRequest
    ) -> HTTPResponse {
        let answer = Mutex<HTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        handler(
            request,
            Responder { response in
                answer.withLock { $0 = response }
                done.signal()
            })
        done.wait()
        return answer.withLock { $0! }
    }
}
