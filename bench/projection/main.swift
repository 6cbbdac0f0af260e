import DeliveryActivityContract
import Foundation
import OrderDomain
import Projection

// Measures how many complete Live Activity payloads one core builds per second: projection,
// scrubbing of the free-text fields, deterministic encoding, fingerprint and size check.
// Run with `make bench-projection` (release build). Prints one line `payloads_per_s=N` last.

let statuses: [OrderStatus] = [.preparing, .pickup, .delivering, .delivered, .cancelled]
let locales = ["en-US", "de-DE", "zh-Hans"]
let placedAt = Date(timeIntervalSince1970: 1_796_212_800)
let orders: [Order] = (0..<1_000).map { index in
    let status = statuses[index % statuses.count]
    return Order(
        id: "o-\(index)", merchantID: "m-1", number: "A-\(1000 + index)",
        merchantName: index % 7 == 0 ? "Pizza Roma call +49 30 1234567" : "Pizza Roma \(index % 13)",
        items: [LineItem(name: "Margherita", quantity: 2, price: 8.5)],
        customer: Customer(id: "c-\(index)", name: "Ana Lima", phone: "+49 30 1234567", locale: locales[index % 3]),
        address: "Hauptstr. 1, 10115 Berlin", payment: Payment(method: "card", brand: "visa", last4: "4242"),
        note: "ring twice", status: status, cancelledAt: status == .cancelled ? .pickup : nil,
        estimatedArrival: placedAt.addingTimeInterval(Double(1200 + index)),
        rider: Rider(id: "r-7", name: "Marco Rossi", phone: nil),
        createdAt: placedAt, updatedAt: placedAt
    )
}
let planner = PushPlanner()
let activity = ActivityContext(
    bundleID: "com.example.app", startedAt: placedAt,
    shown: ShownState(status: .placed, fingerprint: "an earlier state"))
let now = placedAt.addingTimeInterval(600)

func run(iterations: Int) -> (Int, Int) {
    var built = 0
    var bytes = 0
    for iteration in 0..<iterations {
        let order = orders[iteration % orders.count]
        if case .send(let push) = try! planner.planUpdate(order: order, activity: activity, now: now) {
            built += 1
            bytes &+= push.payload.count
        }
    }
    return (built, bytes)
}

_ = run(iterations: 50_000)
var best = 0.0
var checksum = 0
for _ in 0..<5 {
    let start = DispatchTime.now().uptimeNanoseconds
    let (built, bytes) = run(iterations: 400_000)
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    checksum &+= bytes
    best = max(best, Double(built) / seconds)
    print(String(format: "round: %d payloads in %.3f s = %.0f/s", built, seconds, Double(built) / seconds))
}
print("checksum=\(checksum)")
print("payloads_per_s=\(Int(best))")
