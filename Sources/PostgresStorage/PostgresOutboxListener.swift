internal import Foundation
import Storage
internal import Synchronization

/// Wakes this node's pushers when any node queues a push: a connection of its own `LISTEN`s to the
/// outbox's channel (a trigger notifies it at the commit of every insert) and calls `onQueued`.
///
/// A lost connection is made again, waiting 0.1 s and doubling up to 5 s between attempts, and
/// `onQueued` is called once it is back, for what was queued while it was away. The pushers' own
/// polling stays the fallback: a notification missed costs at most one poll interval.
package final class PostgresOutboxListener: Sendable {
    static let channel = "deliveryd_outbox"
    private let stopped = Atomic<Bool>(false)
    private let connections = Atomic<Int>(0)

    /// Starts listening on a thread of its own.
    package init(url: String, onQueued: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in listen(url: url, onQueued: onQueued) }
        thread.name = "deliveryd.outbox-listener"
        thread.start()
    }

    /// Connections made so far (one, plus one per reconnection).
    package var connectionsMade: Int { connections.load(ordering: .relaxed) }

    /// Stops listening within half a second.
    package func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func listen(url: String, onQueued: @Sendable () -> Void) {
        var backoff = 0.1
        while !stopped.load(ordering: .relaxed) {
            do {
                let connection = try PostgresConnection.connect(url: url, connectTimeout: 5)
                try connection.execute("LISTEN \(Self.channel)")
                connections.add(1, ordering: .relaxed)
                backoff = 0.1
                onQueued()
                while !stopped.load(ordering: .relaxed) {
                    if !(try connection.notifications(waitingUpTo: 0.5)).isEmpty { onQueued() }
                }
            } catch {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(5, backoff * 2)
            }
        }
    }
}
