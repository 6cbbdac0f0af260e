import Foundation
import TestScheduling
import TestSupport
import Testing

@Suite("Disk full", .serialized, .heavy)
struct DiskFullTests {
    static let adminKey = "disk-full-admin-key-0123456789"

    /// On a 1 MB tmpfs the database fills up: writes get `503` with `reason: disk_full` and lose
    /// nothing acknowledged, reads keep working, and once the file system grows writes succeed again
    /// without a restart. (Mounting needs root, as `make test` runs.)
    @Test func writesFailClearlyAndRecover() throws {
        let mountPoint = NSTemporaryDirectory() + "deliveryd-full-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try #require(
            try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint]) == 0, "mount needs root")
        defer {
            _ = try? Self.run("/bin/umount", ["-l", mountPoint])
            try? FileManager.default.removeItem(atPath: mountPoint)
        }
        let server = try DeliverydProcess(
            extraArguments: ["--admin-key", Self.adminKey, "--access-log", "off"] + DeliverydProcess.crowdArguments,
            dataDirectory: mountPoint + "/data",
            keepData: true)
        defer { _ = server.stop() }
        try LoopbackHTTP.waitUntilHealthy(port: server.port)

        let padding = String(repeating: "x", count: 400)
        func create(_ number: String) throws -> LoopbackHTTP.Response {
            var body = EndToEndTests.orderBody(number, customer: "c-1", eta: Date().addingTimeInterval(1800))
            body["merchantId"] = "m-1"
            body["address"] = "Hauptstr. 1 " + padding
            return try LoopbackHTTP.send(port: server.port, "POST", "/v1/orders", bearer: Self.adminKey, json: body)
        }
        var acknowledged: [String] = []
        var refused: LoopbackHTTP.Response?
        for index in 0..<2000 {
            let response = try create("F-\(index)")
            if response.status == 201 {
                acknowledged.append((response.json["order"] as? [String: Any])?["id"] as? String ?? "")
            } else {
                refused = response
                break
            }
        }
        let full = try #require(refused, "the file system never filled up")
        #expect(full.status == 503 && full.headers["retry-after"] == "5")
        let error = full.json["error"] as? [String: Any]
        #expect((error?["details"] as? [String: Any])?["reason"] as? String == "disk_full", "\(full.text)")
        #expect(acknowledged.count > 5)

        #expect(try LoopbackHTTP.send(port: server.port, "GET", "/readyz").status == 200)
        for id in acknowledged {
            #expect(
                try LoopbackHTTP.send(port: server.port, "GET", "/v1/orders/\(id)", bearer: Self.adminKey).status == 200
            )
        }

        try #require(try Self.run("/bin/mount", ["-o", "remount,size=32m", mountPoint]) == 0)
        #expect(try create("F-\(acknowledged.count)").status == 201, "the refused order, retried")
        #expect(try create("G-1").status == 201)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
