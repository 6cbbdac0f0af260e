internal import Foundation
package import Storage

/// A bounded set of connections to one PostgreSQL database, lent to the service's threads one
/// caller at a time.
///
/// - A caller waits at most `acquireTimeout` for a free connection, then gets `busy` (503 with
///   `Retry-After`): never an unbounded queue, never a hang.
/// - While the database cannot be reached, callers get `unavailable` at once: after a failed connect
///   the pool waits before the next attempt (0.1 s, doubling up to `maximumBackoff`), so a server
///   that restarts is not hammered, and reconnects by itself once it answers.
/// - A connection that lost its server is dropped when it comes back, not lent again.
///
/// - Note: `@unchecked Sendable` is sound: every stored property but the constants is read and
///   written only while `condition` is locked, and a connection is lent to one caller at a time.
package final class PostgresPool: @unchecked Sendable {
    package struct Configuration: Sendable {
        /// libpq's URL (several hosts allowed, e.g. `target_session_attrs=read-write`).
        package var url: String
        /// Connections at most.
        package var size = 8
        /// Seconds to wait for a server to answer a connect.
        package var connectTimeout = 5
        /// Milliseconds a statement may run before the server cancels it (`busy`).
        package var statementTimeout = 10_000
        /// Seconds a caller waits for a free connection.
        package var acquireTimeout = 5.0
        /// Seconds at most between two attempts to reach an unreachable server.
        package var maximumBackoff = 5.0

        package init(url: String) {
            self.url = url
        }
    }

    package let configuration: Configuration
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var waiting = 0
    private var failedConnects = 0
    private var nextAttempt: Date?
    private var lastError: StorageError?

    package init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// Lends a connection to `body`; what `body` throws comes back as it is.
    /// - Throws: `StorageError` `busy` when no connection came free in time, `unavailable` when the
    ///   server cannot be reached.
    package func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    package var health: ConnectionPoolHealth {
        condition.lock()
        defer { condition.unlock() }
        return ConnectionPoolHealth(open: open, idle: idle.count, waiting: waiting, reachable: failedConnects == 0)
    }

    private func acquire() throws(StorageError) -> PostgresConnection {
        let deadline = Date().addingTimeInterval(configuration.acquireTimeout)
        condition.lock()
        while true {
            if let connection = idle.popLast() {
                condition.unlock()
                return connection
            }
            if open < configuration.size {
                if let nextAttempt, Date() < nextAttempt {
                    let reason = lastError?.message ?? "unknown"
                    condition.unlock()
                    throw StorageError(.unavailable, "the database cannot be reached (\(reason)); trying again shortly")
                }
                open += 1
                condition.unlock()
                return try connect()
            }
            waiting += 1
            let signalled = condition.wait(until: deadline)
            waiting -= 1
            if !signalled && idle.isEmpty && open >= configuration.size {
                condition.unlock()
                throw StorageError(
                    .busy, "no database connection came free within \(configuration.acquireTimeout) s")
            }
        }
    }

    /// Opens a connection for a slot already counted in `open`; a failure gives the slot back and
    /// pushes the next attempt out.
    private func connect() throws(StorageError) -> PostgresConnection {
        do {
            let connection = try PostgresConnection.connect(
                url: configuration.url, connectTimeout: configuration.connectTimeout,
                statementTimeout: configuration.statementTimeout)
            condition.lock()
            failedConnects = 0
            nextAttempt = nil
            condition.unlock()
            return connection
        } catch {
            condition.lock()
            open -= 1
            failedConnects += 1
            lastError = error
            let backoff = min(configuration.maximumBackoff, 0.1 * pow(2, Double(min(failedConnects - 1, 16))))
            nextAttempt = Date().addingTimeInterval(backoff)
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func release(_ connection: PostgresConnection) {
        condition.lock()
        if connection.isOpen {
            idle.append(connection)
        } else {
            open -= 1
        }
        condition.signal()
        condition.unlock()
    }
}
