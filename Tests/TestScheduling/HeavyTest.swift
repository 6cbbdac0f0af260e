import Lifecycle
internal import Synchronization
public import Testing

/// Runs each test it marks on a thread of its own, at most two such tests at a time.
///
/// swift-testing calls a synchronous test function on one of Swift's cooperative threads, of which
/// there are as many as cores (two here). The tests that start processes and servers and wait for
/// them block that thread for seconds to minutes, and two of them at once left every async test
/// (the lifecycle suites', with their one-minute limits) waiting two minutes for a thread. Marked
/// `.heavy`, such a test waits for a slot without holding a thread, then runs on its own: the
/// cooperative threads stay free, and no more heavy tests run at once than the pool let run before.
public struct HeavyTest: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Called once for a suite as a whole (no test case) and then for each of its test cases.
        guard testCase != nil else { return try await function() }
        await HeavyTestSlots.shared.acquire()
        defer { HeavyTestSlots.shared.release() }
        let executor = ThreadExecutor(name: "heavy test")
        defer { executor.finish() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == HeavyTest {
    /// See `HeavyTest`.
    public static var heavy: Self { HeavyTest() }
}

/// Two slots for heavy tests; a test waiting for one is suspended, not blocking a thread.
final class HeavyTestSlots: Sendable {
    static let shared = HeavyTestSlots(slots: 2)

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(slots: Int) {
        state = Mutex(State(free: slots))
    }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
