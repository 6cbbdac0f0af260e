import Foundation
import Glibc
import TestScheduling
import TestSupport
import Testing

@Suite("deliveryd executable", .serialized, .heavy)
struct ExecutableTests {
    /// A second deliveryd on a data directory in use fails at once, naming the holder; one on a port
    /// another process listens on fails too, although our listeners share it through SO_REUSEPORT.
    @Test func oneProcessPerDataDirectoryAndPort() throws {
        let first = try DeliverydProcess(extraArguments: ["--admin-key", "lock-admin-key-0123456789"])
        defer { _ = first.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: first.port)

        let sameDirectory = try DeliverydProcess.run([
            "--listen", "127.0.0.1:\(first.port &+ 1)", "--data-dir", first.dataDirectory,
        ])
        #expect(sameDirectory.0 == 1)
        #expect(
            sameDirectory.2.contains("in use by another deliveryd (pid \(first.process.processIdentifier) since"),
            "\(sameDirectory.2)")

        let otherDirectory = NSTemporaryDirectory() + "deliveryd-port-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: otherDirectory) }
        let samePort = try DeliverydProcess.run([
            "--listen", "127.0.0.1:\(first.port)", "--data-dir", otherDirectory,
        ])
        #expect(samePort.0 == 1)
        #expect(samePort.2.contains("cannot listen on 127.0.0.1:\(first.port)"), "\(samePort.2)")
        #expect(samePort.2.contains("Address already in use"))
        // The first one still serves, alone.
        #expect(try LoopbackHTTP.send(port: first.port, "GET", "/healthz").status == 200)
    }

    /// `--help` lists every setting with its flag and environment variable, and exits 0.
    @Test func helpListsSettings() throws {
        let (status, output, _) = try DeliverydProcess.run(["--help"])
        #expect(status == 0)
        for name in [
            "--listen", "DELIVERYD_LISTEN", "--data-dir", "DELIVERYD_DATA_DIR", "--admin-key", "DELIVERYD_ADMIN_KEY",
            "--apns-key-file", "APNS_KEY_FILE", "--apns-key-id", "APNS_KEY_ID", "--apns-team-id", "APNS_TEAM_ID",
            "--apns-topic", "APNS_TOPIC", "--apns-development-url", "APNS_DEVELOPMENT_URL",
            "--apns-production-url", "APNS_PRODUCTION_URL", "--apns-ca-file", "APNS_CA_FILE",
            "--dismissal-delay", "DELIVERYD_DISMISSAL_DELAY", "--date-encoding", "DELIVERYD_DATE_ENCODING",
        ] {
            #expect(output.contains(name), "help does not mention \(name)")
        }
    }

    /// Bad settings stop the process at start-up with status 2 and a message naming the setting.
    @Test(
        arguments: [
            (["--listen", "nowhere"], [:], "--listen"),
            (["--bogus"], [:], "--bogus"),
            (["--date-encoding", "iso"], [:], "--date-encoding"),
            (["--date-encoding", "unix"], [:], "31 years"),
            (["--admin-key", "dk_abc_0123456789abcdef"], [:], "must not start with dk_"),
            (["--minimum-freshness", "5"], [:], "--minimum-freshness"),
            (["--apns-key-file", "/tmp/k.p8"], [:], "--apns-key-id"),
            ([], ["DELIVERYD_DISMISSAL_DELAY": "-5"], "DELIVERYD_DISMISSAL_DELAY"),
            (["--apns-apps", "com.example.app=/keys/a.p8:KEYID"], [:], "--apns-apps"),
            ([], ["APNS_APPS": "com.example.app"], "APNS_APPS"),
            (["--trusted-proxies", "10.0.0.0/8,proxy.local"], [:], "--trusted-proxies"),
            ([], ["DELIVERYD_MAX_CONNECTIONS_PER_ADDRESS": "-1"], "DELIVERYD_MAX_CONNECTIONS_PER_ADDRESS"),
        ] as [([String], [String: String], String)])
    func badConfigurationFailsLoudly(arguments: [String], environment: [String: String], named: String) throws {
        let (status, _, errors) = try DeliverydProcess.run(arguments, environment: environment)
        #expect(status == 2)
        #expect(errors.contains(named))
    }

    /// The real binary starts, creates its database, answers `GET /healthz`, logs the request without
    /// its credentials or query, and stops on SIGTERM.
    @Test func servesHealthz() async throws {
        let server = try DeliverydProcess()
        var body: String?
        for _ in 0..<100 where body == nil {
            body = try? fetch(port: server.port, path: "/healthz")
            if body == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let database = server.dataDirectory + "/deliveryd.sqlite3"
        #expect(FileManager.default.fileExists(atPath: database))
        #expect(server.stop() == 0)
        let response = try #require(body)
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(response.hasSuffix("\r\n\r\n{\"status\":\"ok\"}"))
        #expect(response.contains("Content-Type: application/json\r\n"))
        let log = server.standardError()
        let lines = log.split(separator: "\n")
        #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) is [String: Any] })
        let entries = server.logLines()
        #expect(entries.contains { $0["url.full"] as? String == "http://127.0.0.1:\(server.port)" })
        let access = entries.first { $0["message"] as? String == "http.request" }
        #expect(access?["url.path"] as? String == "/healthz" && access?["http.response.status_code"] as? Int == 200)
        #expect(access?["http.route"] as? String == "/healthz")
        #expect(!log.contains("secret"))
        #expect(entries.contains { $0["pusher.sender"] as? String == "log" })
    }

    /// Under systemd (`Type=notify`) the process says `READY=1` once it answers, and `STOPPING=1`
    /// when SIGTERM starts its graceful stop.
    @Test func tellsSystemdWhenReadyAndWhenStopping() throws {
        let notifications = try NotificationSocket()
        let server = try DeliverydProcess(environment: ["NOTIFY_SOCKET": notifications.name])
        let ready = notifications.receive()
        #expect(ready?.split(separator: "\n").first == "READY=1")
        #expect(ready?.contains("STATUS=serving on 127.0.0.1:\(server.port)") == true)
        // Ready means serving: the first request after it is answered.
        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/healthz").status == 200)
        kill(server.process.processIdentifier, SIGTERM)
        #expect(notifications.receive() == "STOPPING=1")
        #expect(server.stop() == 0)
    }

    /// `--version` names the release, the commit and the day of the build (`unknown` for the two
    /// last in a plain `swift build`, which nobody stamped); the log and the metrics carry the same.
    @Test func versionNamesTheBuild() throws {
        let (status, output, _) = try DeliverydProcess.run(["--version"])
        #expect(status == 0)
        let line = output.trimmingCharacters(in: .newlines)
        #expect(
            line.wholeMatch(of: /deliveryd \d+\.\d+\.\d+ \(commit [0-9a-z-]+, built (\d{4}-\d{2}-\d{2}|unknown)\)/)
                != nil, "\(line)")
    }

    /// `env-file` writes every setting, commented at its default, but those it is given; the Debian
    /// package installs its output as /etc/deliveryd/deliveryd.env.
    @Test func environmentFileHasEverySetting() throws {
        let (status, output, _) = try DeliverydProcess.run([
            "env-file", "DELIVERYD_DATA_DIR=/var/lib/deliveryd", "DELIVERYD_ADMIN_KEY_FILE=/etc/deliveryd/admin.key",
        ])
        #expect(status == 0)
        let lines = output.split(separator: "\n").map(String.init)
        let (_, help, _) = try DeliverydProcess.run(["--help"])
        let variables = help.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            return words.count == 2 && words[0] == "env" ? String(words[1]) : nil
        }
        #expect(variables.count > 40)
        for variable in variables {
            #expect(lines.contains { $0.hasPrefix("#\(variable)=") || $0.hasPrefix("\(variable)=") }, "\(variable)")
        }
        let assignments = lines.filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(
            assignments == [
                "DELIVERYD_DATA_DIR=/var/lib/deliveryd", "DELIVERYD_ADMIN_KEY_FILE=/etc/deliveryd/admin.key",
            ])
        #expect(lines.contains("#DELIVERYD_LISTEN=127.0.0.1:8080"))
        #expect(lines.contains("#DELIVERYD_SYNCHRONOUS=full"))
        // A secret has no example value, and the file's header says where secrets go instead.
        #expect(lines.contains("#DELIVERYD_ADMIN_KEY="))
        #expect(output.contains("Secrets do not belong in this file"))

        // A variable that is no setting's is refused, named.
        let (bad, _, errors) = try DeliverydProcess.run(["env-file", "DELIVERYD_NO_SUCH_SETTING=1"])
        #expect(bad == 2)
        #expect(errors.contains("DELIVERYD_NO_SUCH_SETTING"))
    }

    private func fetch(port: UInt16, path: String) throws -> String {
        guard let fd = connectLoopback(port: port) else { throw NotListening() }
        defer { close(fd) }
        let request = Array(
            "GET \(path)?q=secret-query HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer secret-key\r\nConnection: close\r\n\r\n"
                .utf8
        )
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            response.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: response, as: UTF8.self)
    }
}

/// The server did not accept a connection (yet).
struct NotListening: Error {}

@Suite("deliveryd backup", .heavy)
struct BackupCommandTests {
    /// `deliveryd backup PATH` writes a copy that opens as a SQLite database with the schema, and
    /// refuses to overwrite an existing file. The second run starts in `/`: the migrations ship with
    /// the binary, not the working directory.
    @Test func backupWritesCopy() throws {
        let directory = NSTemporaryDirectory() + "deliveryd-backup-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = directory + "/copy.sqlite3"
        let (status, output, errors) = try DeliverydProcess.run(["backup", target, "--data-dir", directory + "/data"])
        #expect(status == 0, "\(errors)")
        #expect(output.contains("written to \(target)"))
        let header = try #require(FileManager.default.contents(atPath: target))
        #expect(header.prefix(15) == Data("SQLite format 3".utf8))
        #expect(try Self.mode(target) == 0o600, "a backup holds customers' details: its owner's only")
        #expect(try Self.mode(directory + "/data") == 0o700)
        for file in ["deliveryd.sqlite3", "deliveryd.sqlite3-wal", "deliveryd.sqlite3-shm"] {
            let path = directory + "/data/" + file
            if FileManager.default.fileExists(atPath: path) { #expect(try Self.mode(path) == 0o600, "\(file)") }
        }
        let (again, _, againErrors) = try DeliverydProcess.run(
            ["backup", target, "--data-dir", directory + "/data"], directory: "/"
        )
        #expect(again == 1)
        #expect(againErrors.contains("exists already"))
    }

    /// The permission bits of `path`.
    static func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) & 0o777
    }

    /// A database an older version left readable by all (0644) is its owner's alone after a start,
    /// and so are the WAL and shared-memory files the running service makes.
    @Test func dataFilesBecomeTheOwnersOnly() throws {
        let directory = NSTemporaryDirectory() + "deliveryd-modes-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (status, _, errors) = try DeliverydProcess.run(["keys", "list", "--data-dir", directory])
        #expect(status == 0, "\(errors)")
        let database = directory + "/deliveryd.sqlite3"
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: database)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", "modes-admin-key-0123456789"], dataDirectory: directory, keepData: true)
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        #expect(try Self.mode(database) == 0o600)
        #expect(try Self.mode(database + "-wal") == 0o600)
        #expect(try Self.mode(database + "-shm") == 0o600)
        #expect(server.stop() == 0)
    }
}

@Suite("deliveryd keys and the first admin key", .serialized, .heavy)
struct KeyCommandTests {
    /// Revoking the configured admin key holds across a restart with the same `--admin-key`; a new
    /// value is a new, working key.
    @Test func revokedConfiguredAdminKeyStaysRevoked() throws {
        let configured = "configured-admin-key-0123456789"
        let first = try DeliverydProcess(extraArguments: ["--admin-key", configured], keepData: true)
        defer { try? FileManager.default.removeItem(atPath: first.dataDirectory) }
        try LoopbackHTTP.waitUntilHealthy(port: first.port)
        let other =
            try LoopbackHTTP.send(
                port: first.port, "POST", "/v1/admin/keys", bearer: configured, json: ["role": "admin"]
            ).json["key"] as? String ?? ""
        #expect(
            try LoopbackHTTP.send(port: first.port, "DELETE", "/v1/admin/keys/configured-admin", bearer: other).status
                == 204)
        #expect(first.stop() == 0)

        let again = try DeliverydProcess(
            extraArguments: ["--admin-key", configured], dataDirectory: first.dataDirectory, keepData: true)
        try LoopbackHTTP.waitUntilHealthy(port: again.port)
        #expect(try LoopbackHTTP.send(port: again.port, "GET", "/v1/admin/keys", bearer: configured).status == 401)
        #expect(again.stop() == 0)
        #expect(again.logLines().contains { $0["message"] as? String == "admin_key.configured_revoked" })

        let renewed = "renewed-admin-key-0123456789"
        let third = try DeliverydProcess(
            extraArguments: ["--admin-key", renewed], dataDirectory: first.dataDirectory, keepData: true)
        try LoopbackHTTP.waitUntilHealthy(port: third.port)
        #expect(try LoopbackHTTP.send(port: third.port, "GET", "/v1/admin/keys", bearer: renewed).status == 200)
        #expect(third.stop() == 0)
    }

    /// `--admin-key-file` reads the key from the file's first line: it works, and the key is in
    /// neither the command line nor the log.
    @Test func adminKeyFromAFile() throws {
        let directory = NSTemporaryDirectory() + "deliveryd-keyfile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = "file-admin-key-0123456789abcdef"
        let file = directory + "/admin.key"
        try Data((key + "\n").utf8).write(to: URL(fileURLWithPath: file))
        let server = try DeliverydProcess(extraArguments: ["--admin-key-file", file, "--access-log", "off"])
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/v1/admin/keys", bearer: key).status == 200)
        let commandLine = try String(
            contentsOfFile: "/proc/\(server.process.processIdentifier)/cmdline", encoding: .utf8)
        #expect(!commandLine.contains(key))
        #expect(server.stop() == 0)
        #expect(!server.standardError().contains(key))

        try Data("short\n".utf8).write(to: URL(fileURLWithPath: file))
        let (status, _, errors) = try DeliverydProcess.run(["--admin-key-file", file, "--data-dir", directory])
        #expect(status == 2)
        #expect(errors.contains("--admin-key-file"))
    }

    /// The first start prints a working admin key once; a second start on the same data creates none.
    @Test func firstStartPrintsAnAdminKey() throws {
        let server = try DeliverydProcess(extraArguments: ["--access-log", "off"], keepData: true)
        defer { try? FileManager.default.removeItem(atPath: server.dataDirectory) }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        #expect(server.stop() == 0)
        let output = server.standardOutput()
        let key = try #require(output.firstMatch(of: /created the first admin key[^:]*: (dk_[0-9a-f_k]+)/)?.1)
        #expect(!server.standardError().contains(String(key)))

        let again = try DeliverydProcess(
            extraArguments: ["--access-log", "off"], dataDirectory: server.dataDirectory, keepData: true)
        try LoopbackHTTP.waitUntilHealthy(port: again.port)
        let keys = try LoopbackHTTP.send(port: again.port, "GET", "/v1/admin/keys", bearer: String(key))
        #expect(keys.status == 200)
        #expect((keys.json["keys"] as? [[String: Any]])?.count == 1)
        #expect(again.stop() == 0)
        #expect(!again.standardOutput().contains("created the first admin key"))
    }

    /// `keys create` prints a key that the server accepts; `keys list` never shows keys; a revoked
    /// key is refused.
    @Test func keysCommandManagesKeys() throws {
        let directory = NSTemporaryDirectory() + "deliveryd-keys-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (status, output, _) = try DeliverydProcess.run(
            ["keys", "create", "--role", "merchant", "--merchant", "m-1", "--data-dir", directory])
        #expect(status == 0)
        let key = try #require(output.firstMatch(of: /key\t(dk_\S+)/)?.1)
        let id = try #require(output.firstMatch(of: /id\t(\S+)/)?.1)
        let (badStatus, _, badErrors) = try DeliverydProcess.run(
            ["keys", "create", "--role", "merchant", "--data-dir", directory])
        #expect(badStatus == 2 && badErrors.contains("merchantId"))

        let (_, listing, _) = try DeliverydProcess.run(["keys", "list", "--data-dir", directory])
        #expect(listing.contains(String(id)) && listing.contains("m-1"))
        #expect(!listing.contains(String(key.suffix(16))))

        let server = try DeliverydProcess(
            extraArguments: ["--access-log", "off"], dataDirectory: directory, keepData: true)
        try LoopbackHTTP.waitUntilHealthy(port: server.port)
        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/v1/orders/none", bearer: String(key)).status == 404)
        let (revoked, _, _) = try DeliverydProcess.run(["keys", "revoke", String(id), "--data-dir", directory])
        #expect(revoked == 0)
        // The running node sees the revocation at its next check of the key generation, twice a
        // second (docs/security.md); waited for here, not timed.
        let deadline = Date().addingTimeInterval(30)
        var answer = 0
        repeat {
            answer = try LoopbackHTTP.send(port: server.port, "GET", "/v1/orders/none", bearer: String(key)).status
            if answer != 401 { Thread.sleep(forTimeInterval: 0.05) }
        } while answer != 401 && Date() < deadline
        #expect(answer == 401)
        #expect(server.stop() == 0)
    }
}
