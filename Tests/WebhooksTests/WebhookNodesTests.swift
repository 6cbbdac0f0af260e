import Cryptography
import Foundation
import Storage
import Telemetry
import TestSupport
import Testing

@testable import Webhooks

/// Two nodes on one PostgreSQL database, each with its own dispatcher, and one endpoint: its stream
/// is read by one node at a time, so each event reaches the receiver once; a node that stops lets
/// go of the stream and the other goes on from its cursor.
@Suite("Webhook delivery from two nodes")
struct WebhookNodesTests {
    @Test func eachEventReachesTheReceiverOnceWhicheverNodeWroteIt() throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let place = NSTemporaryDirectory() + "webhook-nodes-" + UUID().uuidString
        let nodes: [any DeliveryStore] = [try TestStore.postgres(place), try TestStore.postgres(place)]
        let sealingKey = SealingKey.generate()
        let secret = WebhookSecret.generate()
        try nodes[0].createWebhookEndpoint(
            WebhookEndpointRecord(
                id: "ep-1", merchantID: "m-1", url: receiver.url, description: "", eventTypes: [], enabled: true,
                secretSealed: try secret.sealed(with: sealingKey, endpointID: "ep-1"), now: Date()))
        try receiver.trust([secret.text])
        let dispatchers = try nodes.indices.map { index in
            let dispatcher = WebhookDispatcher(
                store: nodes[index], sealingKey: sealingKey,
                configuration: modified(
                    WebhookDispatcherConfiguration(
                        policy: WebhookURLPolicy(allowsHTTP: true, allowsPrivateNetworks: true))
                ) {
                    $0.timeoutSeconds = 5
                    $0.perEndpoint = 4
                    $0.pollInterval = 0.05
                },
                owner: "node-\(index)", registry: MetricsRegistry(), logger: Logger(label: "webhooks", sink: { _ in }))
            try dispatcher.start()
            return dispatcher
        }
        defer { for dispatcher in dispatchers { dispatcher.stop(timeout: 5) } }
        var created = 0
        func orders(_ count: Int, on stores: [any DeliveryStore]) throws {
            for _ in 0..<count {
                created += 1
                _ = try WebhookDeliveryTests.createOrder(number: created, merchant: "m-1", in: stores[created % 2])
            }
        }
        func delivered() -> [String] {
            receiver.records().filter { $0["status"] as? Int == 200 }.compactMap {
                ($0["headers"] as? [String: String])?["webhook-id"]
            }
        }

        try orders(20, on: nodes)
        #expect(receiver.wait(timeout: 60) { _ in delivered().count >= 20 })
        // The first node stops: it lets go of the stream, and the second reads on from the cursor.
        dispatchers[0].stop(timeout: 5)
        try orders(20, on: nodes)
        #expect(receiver.wait(timeout: 60) { _ in delivered().count >= 40 })
        usleep(300_000)  // room for a second copy of any event to arrive, were one sent
        let events = try nodes[1].webhookEvents(merchantID: "m-1", limit: 100).map(\.id)
        #expect(events.count == 40)
        #expect(delivered().sorted() == events.sorted(), "each event once")
        #expect(receiver.records().allSatisfy { $0["verified"] as? Bool == true })
    }
}
