import Foundation
import Testing

@testable import Storage
@testable import Webhooks

/// The dispatcher's record of an endpoint's stream: answers come back in any order, and the cursor
/// it writes moves only past a run of finished events.
@Suite("Held deliveries")
struct HeldDeliveriesTests {
    static func position(_ sequence: Int64) -> WebhookEventPosition {
        WebhookEventPosition(transaction: 0, sequence: sequence)
    }

    static func delivery(_ sequence: Int64, endpoint: String = "ep-1") -> WebhookDelivery {
        WebhookDelivery(
            source: .stream(position(sequence)), endpointID: endpoint, eventID: "msg_\(sequence)",
            eventCreatedAt: Date(timeIntervalSince1970: 0), attempts: 0, body: [], url: "https://hooks.example.com",
            secretSealed: [], previousSecretSealed: nil, failingSince: nil)
    }

    /// Starts every queued delivery; their tags by sequence.
    static func startAll(_ held: inout HeldDeliveries) -> [Int64: Int64] {
        var tags: [Int64: Int64] = [:]
        while let next = held.nextToStart() {
            held.started(next)
            tags[next.delivery.position!.sequence] = next.tag
        }
        return tags
    }

    @Test func theCursorMovesOnlyPastARunOfFinishedEvents() throws {
        var held = HeldDeliveries(perEndpoint: 8, maximumInFlight: 8)
        // Events 1 to 4 read, 3 of a type the endpoint does not want.
        held.queue(
            WebhookClaim(deliveries: [1, 2, 4].map { Self.delivery($0) }, readThrough: ["ep-1": Self.position(4)]),
            at: Date())
        let tags = Self.startAll(&held)
        #expect(held.streamProgress["ep-1"]?.finishedThrough == nil)
        #expect(held.streamProgress["ep-1"]?.holding == true)
        _ = held.finish(tag: tags[2]!)
        _ = held.finish(tag: tags[4]!)
        #expect(held.streamProgress["ep-1"]?.finishedThrough == nil, "event 1 is still on the wire")
        _ = held.finish(tag: tags[1]!)
        let progress = try #require(held.streamProgress["ep-1"])
        #expect(progress.finishedThrough == Self.position(4) && !progress.holding)
        held.recorded(held.streamProgress)
        #expect(held.streams.isEmpty, "a finished stream whose cursor is written is let go")
        #expect(held.streamProgress.isEmpty)
    }

    /// A pause drops what waits in the queue: the stream is read again after what is still in flight.
    @Test func droppedDeliveriesAreReadAgain() throws {
        var held = HeldDeliveries(perEndpoint: 2, maximumInFlight: 8)
        held.queue(
            WebhookClaim(deliveries: (1...4).map { Self.delivery($0) }, readThrough: ["ep-1": Self.position(4)]),
            at: Date())
        let tags = Self.startAll(&held)
        #expect(tags.keys.sorted() == [1, 2], "two on the wire, two queued")
        _ = held.finish(tag: tags[1]!)
        held.dropQueued(endpointID: "ep-1")
        let progress = try #require(held.streamProgress["ep-1"])
        #expect(progress.readThrough == Self.position(2), "3 and 4 are read again")
        #expect(progress.finishedThrough == Self.position(1) && progress.holding)
        _ = held.finish(tag: tags[2]!)
        #expect(held.streamProgress["ep-1"]?.finishedThrough == Self.position(2))
    }

    /// An endpoint's queue gives its deliveries back in the order they came, across the points
    /// where it drops what was taken.
    @Test func theQueueKeepsItsOrder() {
        var queue = FIFO<Int>()
        var taken: [Int] = []
        var next = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) {
                queue.append(next)
                next += 1
            }
            for _ in 0..<(round % 5 + 1) { if let first = queue.popFirst() { taken.append(first) } }
            #expect(queue.count == next - taken.count)
            #expect(Array(queue.elements) == Array(taken.count..<next))
        }
        while let first = queue.popFirst() { taken.append(first) }
        #expect(taken == Array(0..<next))
        #expect(queue.isEmpty)
    }
}
