import Foundation
import Glibc
import TestSupport
import Testing

@testable import Storage

@Suite("Durability under kill -9")
struct CrashTests {
    static var writerURL: URL { BuiltProduct.url("StorageCrashWriter") }

    /// 20 times: a writer is killed with SIGKILL at a random moment of its writing; every change it acknowledged is in
    /// the file afterwards with its outbox rows (one per activity), and the file passes integrity_check.
    @Test func acknowledgedChangesSurviveSIGKILL() throws {
        let directory = try TemporaryDirectory()
        var acknowledged = 0
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            let process = Process()
            process.executableURL = Self.writerURL
            process.arguments = [directory.path, "r\(round)"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            // Kill at a random moment of the writing, not of the start (a loaded machine may take
            // longer than the delay to open and migrate the database).
            let ready = Self.firstLine(of: output.fileHandleForReading.fileDescriptor)
            try #require(ready == "ready", "the writer did not start")
            usleep(UInt32.random(in: 80_000...400_000, using: &generator))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n").filter { $0.hasPrefix("ack ") }

            let connection = try SQLiteConnection.open(StorageConfiguration(dataDirectory: directory.path))
            #expect(
                try connection.cached("PRAGMA integrity_check").firstRow([]) { try $0.text("integrity_check") } == "ok")
            let eventQuery = try connection.cached("SELECT order_id, to_status FROM order_events WHERE id = ?")
            for line in lines {
                let parts = line.split(separator: " ").map(String.init)
                try #require(parts.count == 4)
                let eventID = try #require(Int64(parts[3]))
                let stored = try eventQuery.firstRow([.integer(eventID)]) {
                    [try $0.text("order_id"), try $0.text("to_status")]
                }
                #expect(stored == [parts[1], parts[2]], "round \(round): \(line) lost")
                if parts[2] != "placed" {
                    let rows = try connection.cached("SELECT count(*) AS queued FROM outbox WHERE event_id = ?")
                        .firstRow([.integer(eventID)]) { try $0.int("queued") }
                    #expect(rows == 2, "round \(round): outbox rows of \(line)")
                }
            }
            acknowledged += lines.count
        }
        #expect(acknowledged > 20, "the writer acknowledged too little to prove anything")
    }

    /// Reads one line from `fd`, a byte at a time (so nothing after it is consumed); empty at end of file.
    static func firstLine(of fd: Int32) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
