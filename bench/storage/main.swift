import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import Synchronization
import TestSupport

// Status changes committed per second with N orders already in the table, each change one
// transaction (order row, event, one outbox row per activity), as the API writes them.
// usage: storage-bench ORDERS DATA_DIR [full|normal] [CHANGES]
// Prints `orders=N synchronous=S commits_per_s=X file_mb=Y` last.

let arguments = CommandLine.arguments
guard arguments.count >= 3, let orderCount = Int(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: storage-bench ORDERS DATA_DIR [full|normal] [CHANGES]\n".utf8))
    exit(2)
}
let synchronous: StorageConfiguration.Synchronous = arguments.count > 3 && arguments[3] == "normal" ? .normal : .full
let changes = arguments.count > 4 ? Int(arguments[4]) ?? 3000 : 3000
let configuration = StorageConfiguration(dataDirectory: arguments[2], synchronous: synchronous)
let database = try Database.open(configuration)
let now = Date()

func makeOrder(_ index: Int) throws -> (Order, OrderEvent) {
    let draft = OrderDraft(
        number: "B-\(index)", merchantName: "Bench Merchant \(index % 100)",
        items: [.init(name: "Margherita", quantity: 2, price: 8.5), .init(name: "Cola", quantity: 1, price: 2.5)],
        customer: .init(id: "c-\(index)", name: "Customer \(index)", phone: "+49 30 1234567", locale: "de-DE"),
        address: "Hauptstr. \(index % 500), 10115 Berlin", payment: .init(method: "card", brand: "visa", last4: "4242"),
        estimatedArrival: now.addingTimeInterval(1800), note: "ring twice"
    )
    // Every order has its rider, as the API's orders do by the time riders post their statuses.
    let (order, created) = try draft.validated(id: "o-\(index)", merchantID: "m-\(index % 100)", by: .admin, at: now)
    let rider = Rider(id: "r-\(index % 1000)", name: "Rider \(index % 1000)", phone: "+49 30 7654321")
    return (try order.assigning(rider, by: .admin, at: now).order, created)
}

let seedStart = Date()
var seeded = 0
while seeded < orderCount {
    let batch = try (seeded..<min(orderCount, seeded + 50_000)).map(makeOrder)
    try database.bulkInsert(batch, activitiesPerOrder: 1, now: now)
    seeded += batch.count
}
try database.drainOutbox(now: now)
let seedSeconds = Date().timeIntervalSince(seedStart)
let fileBytes = ((try? FileManager.default.attributesOfItem(atPath: configuration.databasePath)[.size]) as? Int) ?? 0
let walBytes =
    ((try? FileManager.default.attributesOfItem(atPath: configuration.databasePath + "-wal")[.size]) as? Int) ?? 0
print(String(format: "seeded %d orders in %.1f s", orderCount, seedSeconds))

// Checkpoints run beside the writer, once a second, as deliveryd runs them.
let checkpoints = DispatchSource.makeTimerSource(queue: .global())
checkpoints.schedule(deadline: .now() + 1, repeating: 1)
checkpoints.setEventHandler { _ = try? database.checkpoint() }
checkpoints.resume()

// Distinct random orders, walked through the statuses in passes until `changes` changes, shared out
// among WRITERS threads (default 1): with several, group commit puts their changes in shared
// transactions as it does the API's, and the rate is the writer's ceiling rather than the disk's.
let targets = Array((0..<orderCount).shuffled().prefix(changes))
let work = Array(
    [OrderStatus.preparing, .pickup, .delivering, .delivered]
        .flatMap { status in targets.map { (index: $0, status: status) } }.prefix(changes))
let writers = max(1, Int(ProcessInfo.processInfo.environment["WRITERS"] ?? "") ?? 1)
let writerShares = (0..<writers).map { writer in stride(from: writer, to: work.count, by: writers).map { work[$0] } }
let start = DispatchTime.now().uptimeNanoseconds
let finished = DispatchGroup()
let committedCounts = Mutex([Int](repeating: 0, count: writers))
for (writer, share) in writerShares.enumerated() {
    finished.enter()
    Thread {
        var committed = 0
        for change in share {
            // What the API does for a status change: lock, decide, record.
            do {
                let stored = try database.write { transaction -> StoredChange? in
                    guard let order = try transaction.lockOrder(id: "o-\(change.index)") else { return nil }
                    let now = Date()
                    let outcome = try order.applying(StatusChange(status: change.status), by: .admin, at: now)
                    return try transaction.record(outcome, of: order, now: now, requestID: nil)
                }
                if stored?.eventID != nil { committed += 1 }
            } catch {
                // A failed change would leave the rate meaningless: stop the benchmark.
                FileHandle.standardError.write(Data("storage-bench: \(error)\n".utf8))
                exit(1)
            }
        }
        committedCounts.withLock { $0[writer] = committed }
        finished.leave()
    }.start()
}
finished.wait()
let committed = committedCounts.withLock { $0.reduce(0, +) }
let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
print(
    String(
        format: "orders=%d synchronous=%@ commits=%d seconds=%.2f commits_per_s=%.0f file_mb=%.1f",
        orderCount, synchronous.rawValue.lowercased(), committed, seconds, Double(committed) / seconds,
        Double(fileBytes + walBytes) / 1_048_576
    )
)
