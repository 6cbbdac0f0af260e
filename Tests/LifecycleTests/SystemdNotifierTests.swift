import Foundation
import TestSupport
import Testing

@testable import Lifecycle

@Suite("sd_notify: readiness and stopping told to systemd", .timeLimit(.minutes(1)))
struct SystemdNotifierTests {
    /// A message reaches a socket named by its path, and one named by an abstract name, whole.
    @Test(arguments: [false, true])
    func messagesReachTheSocket(abstract: Bool) throws {
        let socket = try NotificationSocket(abstract: abstract)
        let notifier = SystemdNotifier(socketName: socket.name)
        try notifier.notify("READY=1\nSTATUS=serving")
        #expect(socket.receive() == "READY=1\nSTATUS=serving")
        try notifier.notify("STOPPING=1")
        #expect(socket.receive() == "STOPPING=1")
    }

    /// Without `NOTIFY_SOCKET` (not started by systemd) a message goes nowhere, and that is no error.
    @Test func withoutASocketNothingIsSent() throws {
        #expect(SystemdNotifier(socketName: nil).socketName == nil)
        #expect(SystemdNotifier(socketName: "").socketName == nil)
        try SystemdNotifier(socketName: "").notify("READY=1")
    }

    /// A name systemd would never give, and a socket nobody listens on, are errors the caller logs.
    @Test func unusableSocketsAreErrors() throws {
        #expect(throws: SystemdNotifier.Failure.self) {
            try SystemdNotifier(socketName: "relative/notify").notify("READY=1")
        }
        #expect(throws: SystemdNotifier.Failure.self) {
            try SystemdNotifier(socketName: "/" + String(repeating: "x", count: 200)).notify("READY=1")
        }
        #expect(throws: SystemdNotifier.Failure.self) {
            try SystemdNotifier(socketName: NSTemporaryDirectory() + "no-listener-\(UUID())").notify("READY=1")
        }
    }
}
