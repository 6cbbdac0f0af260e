import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

// A child process for the crash test: it writes orders and status changes through the real storage
// code and prints `ack <order> <status> <event id>` after each commit returned. The test kills it with
// SIGKILL at a random moment after `ready` and checks that every acknowledged change is in the file.
// usage: StorageCrashWriter DATA_DIR RUN_ID

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: StorageCrashWriter DATA_DIR RUN_ID\n".utf8))
    exit(2)
}
let database = try Database.open(StorageConfiguration(dataDirectory: arguments[1]))
let run = arguments[2]

/// Writes a line straight to file descriptor 1, so nothing sits in a buffer when the process dies.
func acknowledge(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

// The database is open and migrated: the test's random moment to kill starts now, however long the
// start took on a loaded machine.
acknowledge("ready")

for index in 0..<100_000 {
    let id = "\(run)-\(index)"
    let now = Date()
    let draft = OrderDraft(
        number: id, merchantName: "Crash Test", items: [.init(name: "Tea", quantity: 1, price: 2)],
        customer: .init(id: "c-\(index)", name: "Ana", phone: "+49 30 1234567", locale: "en"),
        address: "Somewhere 1", payment: .init(method: "cash", brand: nil, last4: nil),
        estimatedArrival: now.addingTimeInterval(1800), note: nil
    )
    let (order, event) = try draft.validated(id: id, merchantID: "m-1", by: .merchant(id: "m-1"), at: now)
    guard
        case .created(_, let createdEvent, _) = try database.createOrder(
            order, event: event, trackingTokenHash: nil, now: now)
    else { continue }
    acknowledge("ack \(id) placed \(createdEvent)")
    for activity in ["a", "b"] {
        _ = try database.registerActivity(
            orderID: id, activityID: activity, pushToken: "t-\(id)-\(activity)", environment: .development,
            bundleID: "com.example.app", shown: nil, now: now
        )
    }
    for status in [OrderStatus.preparing, .pickup, .delivering, .delivered] {
        let stored = try database.change(orderID: id, now: Date()) { order throws(OrderError) in
            try order.applying(StatusChange(status: status), by: .admin, at: Date())
        }
        acknowledge("ack \(id) \(status.rawValue) \(stored?.eventID ?? -1)")
    }
}
