import Foundation
import PostgresStorage
import Synchronization

/// A real PostgreSQL server of its own for a test: `initdb` into a temporary directory, started on a
/// free loopback port, stopped and removed with the value. It runs as the `postgres` user (the
/// server refuses root), from Debian's `postgresql` package (`make test` installs it).
package final class PostgresServer: Sendable {
    package static let binaries = "/usr/lib/postgresql/15/bin"

    package let port: UInt16
    package let directory: String
    /// A libpq URL of a fresh database on this server, for the `deliveryd` role.
    package let url: String
    private let administration = Mutex<PostgresConnection?>(nil)

    /// - Parameter settings: `-c name=value` settings for the server, beside the defaults here
    ///   (no fsync unless asked: these servers hold test data only).
    package init(settings: [String: String] = [:]) throws {
        directory = try Self.newDirectory()
        try Self.asPostgres(
            Self.binaries + "/initdb", ["-D", directory + "/data", "-A", "trust", "-U", "postgres", "--no-sync"])
        port = try Self.start(directory, settings: settings)
        try Self.asPostgres(
            Self.binaries + "/psql",
            [
                "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
                "-c", "CREATE ROLE deliveryd LOGIN PASSWORD 'deliveryd'", "-c",
                "CREATE DATABASE deliveryd OWNER deliveryd",
            ])
        url = "postgresql://deliveryd:deliveryd@127.0.0.1:\(port)/deliveryd"
        Self.register(directory)
    }

    /// A streaming standby of `primary` (a base backup of it, following its WAL), on a port of its own,
    /// and from now on `primary` waits for it at every commit (synchronous replication): what the
    /// primary acknowledged, the standby has.
    package init(standbyOf primary: PostgresServer) throws {
        directory = try Self.newDirectory()
        try Self.asPostgres(
            Self.binaries + "/pg_basebackup",
            [
                "-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", directory + "/data", "-R",
                "-X", "stream", "--no-sync", "--checkpoint=fast",
            ])
        port = try Self.start(directory, settings: [:])
        url = "postgresql://deliveryd:deliveryd@127.0.0.1:\(port)/deliveryd"
        Self.register(directory)
        try primary.administer("ALTER SYSTEM SET synchronous_standby_names = '*'")
        try primary.administer("SELECT pg_reload_conf()")
    }

    /// Makes a standby the primary (what a manager such as Patroni does when the primary is lost).
    package func promote() throws {
        try Self.asPostgres(Self.binaries + "/pg_ctl", ["-D", directory + "/data", "-w", "-t", "60", "promote"])
    }

    private static func newDirectory() throws -> String {
        let directory = NSTemporaryDirectory() + "postgres-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try run("/bin/chown", ["postgres:postgres", directory])
        return directory
    }

    /// Starts the server of `directory` on a free loopback port; returns the port.
    private static func start(_ directory: String, settings: [String: String]) throws -> UInt16 {
        var options = ["fsync": "off", "listen_addresses": "127.0.0.1", "max_connections": "60"]
        options.merge(settings) { _, given in given }
        for _ in 0..<5 {
            let candidate = UInt16.random(in: 33_000...45_000)
            let flags =
                "-p \(candidate) -k \(directory) "
                + options.sorted { $0.key < $1.key }.map { "-c \($0.key)=\($0.value)" }.joined(separator: " ")
            let status = try? asPostgres(
                binaries + "/pg_ctl",
                ["-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o", flags, "start"])
            if status != nil { return candidate }
        }
        let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
        throw PostgresServerError.failed("the server did not start: \(log.suffix(2000))")
    }

    private static func register(_ directory: String) {
        running.withLock { running in
            if running.isEmpty { atexit { PostgresServer.stopAllAtExit() } }
            running.insert(directory)
        }
    }

    /// A libpq URL of a new, empty database on this server, owned by the `deliveryd` role: for a
    /// test that needs a store of its own beside others on one server.
    package func newDatabaseURL() throws -> String {
        let name = "store_" + UUID().uuidString.prefix(13).lowercased().replacingOccurrences(of: "-", with: "")
        try administer("CREATE DATABASE \(name) OWNER deliveryd")
        return "postgresql://deliveryd:deliveryd@127.0.0.1:\(port)/\(name)"
    }

    /// Runs `sql` as the superuser, on a connection kept for that (statements such as CREATE
    /// DATABASE, which the `deliveryd` role may not run).
    package func administer(_ sql: String) throws {
        try administration.withLock { connection in
            if connection == nil || connection?.isOpen == false {
                connection = try PostgresConnection.connect(url: "postgresql://postgres@127.0.0.1:\(port)/postgres")
            }
            try connection?.execute(sql)
        }
    }

    /// Servers not stopped yet: a suite's shared server lives in a `static let`, which is never
    /// deinitialized, so the test process stops what is left when it exits.
    private static let running = Mutex<Set<String>>([])

    private static func stopAllAtExit() {
        for directory in running.withLock({ $0 }) { stopAndRemove(directory) }
    }

    private static func stopAndRemove(_ directory: String) {
        _ = try? asPostgres(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
        running.withLock { _ = $0.remove(directory) }
    }

    deinit {
        Self.stopAndRemove(directory)
    }

    /// Stops the server at once, as a crash would (`immediate`: no checkpoint, clients cut off).
    package func stop() throws {
        try Self.asPostgres(Self.binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
    }

    /// Starts it again on the same port after `stop`.
    package func start() throws {
        try Self.asPostgres(
            Self.binaries + "/pg_ctl",
            [
                "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o",
                "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off", "start",
            ])
    }

    @discardableResult
    private static func asPostgres(_ tool: String, _ arguments: [String]) throws -> Int32 {
        try run("/usr/sbin/runuser", ["-u", "postgres", "--", tool] + arguments)
    }

    /// Runs a tool to its end (bounded: a tool that hangs is killed after two minutes), with its
    /// output in a file. Spawned and reaped here, not with `Process`: its `waitUntilExit` was seen
    /// never to return once `pg_ctl` left the server running (the tool's process stayed a zombie).
    @discardableResult
    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let outputPath = NSTemporaryDirectory() + "postgres-tool-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let argv = ["/usr/bin/timeout", "120", tool] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the test process is inherited: the server `pg_ctl` starts outlives this
        // call, and a descriptor it kept (a `Process`'s exit-watch socket of a peer started by a
        // test beside this one) would hide that peer's exit from `Process` for good. (A descriptor
        // closed meanwhile is no error: glibc's spawn ignores closing one that is not open.)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        var pid: pid_t = 0
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
        guard spawned == 0 else { throw PostgresServerError.failed("cannot run \(tool): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitCode == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw PostgresServerError.failed("\(tool) \(arguments.joined(separator: " ")): \(text.suffix(2000))")
        }
        return exitCode
    }
}

package enum PostgresServerError: Error, CustomStringConvertible {
    case failed(String)

    package var description: String {
        switch self {
        case .failed(let message): message
        }
    }
}
