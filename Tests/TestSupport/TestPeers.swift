package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the Python test peers (the APNs and FCM simulators, the webhook receiver) share: a CA and a
/// server certificate for 127.0.0.1, a start on a free port, and a stop that does not wait.
package enum TestPeers {
    /// Writes `ca.pem` and `server.pem` / `server.key` (P-256, for 127.0.0.1, a day) into `directory`.
    package static func makeServerCertificate(in directory: String) throws {
        try APNsSimulator.shell(
            """
            set -e
            cd '\(directory)'
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
                -days 1 -subj /CN=deliveryd-test-ca 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
                -subj /CN=127.0.0.1 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
                -extfile san.ext 2>/dev/null
            """
        )
    }

    /// Starts `Tests/<script>` with the test virtualenv's Python and `arguments(port)`, on a port below
    /// Linux's ephemeral range (32768 up), so that no outgoing connection holds one. A port another
    /// test took makes the peer exit, and the next of three tries takes another; when all fail,
    /// `directory` is removed and the last error thrown.
    package static func start(
        _ script: String, name: String, directory: String, arguments: (UInt16) -> [String]
    ) throws -> (process: Process, port: UInt16) {
        let python = try APNsSimulator.testPython()
        for attempt in 1...3 {
            let port = UInt16.random(in: 10_000...20_999)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments =
                [APNsSimulator.repositoryRoot.appendingPathComponent("Tests/" + script).path]
                + arguments(port)
            do {
                try APNsSimulator.launch(process, port: port, name: name)
                return (process, port)
            } catch  where attempt < 3 {
                continue
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        }
        throw SimulatorError("\(name) did not start")
    }

    /// Kills a peer at once: a graceful stop would wait for a client's idle connection, which a
    /// long-lived client rightly keeps open.
    ///
    /// The child is reaped here with `waitpid`, not with `Process.waitUntilExit`: on Linux that was
    /// seen to spin for ten minutes on a simulator that had died (a zombie whose exit `Process` never
    /// noticed), with other tests' children exiting around it. Whichever of the two reaps it first,
    /// this returns once the child is gone.
    package static func kill(_ process: Process) {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }
}
