package import FoundationEssentials
package import OrderDomain
package import Storage

extension DeliveryStore {
    /// Stores many placed orders, each with `activitiesPerOrder` registered activities, `batchSize`
    /// orders to a transaction: for benchmarks and load tests that need a large table quickly. It
    /// writes through the transaction handle as the API does, so each registration queues its first
    /// push (one pending outbox row per activity).
    /// - Parameter platform: the activities' devices: iPhones (app `com.example.app`) or Android
    ///   phones (Firebase project `bench`).
    package func bulkInsert(
        _ orders: [(Order, OrderEvent)], activitiesPerOrder: Int, now: Date, batchSize: Int = 20_000,
        platform: PushPlatform = .ios
    ) throws(StorageError) {
        var start = 0
        while start < orders.count {
            let batch = orders[start..<min(orders.count, start + batchSize)]
            try writing { transaction throws(StorageError) in
                for (order, event) in batch {
                    _ = try transaction.createOrder(
                        order, event: event, trackingTokenHash: "bulk-" + order.id, now: now, startsAt: nil,
                        requestID: nil)
                    for index in 0..<activitiesPerOrder {
                        _ = try transaction.registerActivity(
                            orderID: order.id, activityID: "a\(index)", pushToken: "token-\(order.id)-\(index)",
                            environment: .production, bundleID: platform == .ios ? "com.example.app" : "bench",
                            platform: platform, shown: nil, liveLimit: .max, now: now, requestID: nil)
                    }
                }
            }
            start += batchSize
        }
    }

    /// Marks every due outbox row sent, as an idle pusher would have: for a benchmark of status
    /// changes that should not find its seed's registration pushes still pending.
    package func drainOutbox(now: Date) throws(StorageError) {
        while true {
            let claimed = try claimDue(owner: "bulk-load", now: now, lease: 60, limit: 10_000)
            if claimed.isEmpty { return }
            try completePushes(claimed.map { PushCompletion(item: $0, outcome: .sent) }, now: now)
        }
    }
}
