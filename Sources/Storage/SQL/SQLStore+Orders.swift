import DeliveryActivityContract
public import FoundationEssentials
internal import JSONSyntax
public import OrderDomain

extension SQLStore {
    /// Reads an order, private fields included.
    public func order(id: String) throws(StorageError) -> Order? {
        try order(id: id, includingItems: true)
    }

    /// Reads an order; without its items for readers that never show them (a position, the pusher):
    /// decoding the items' JSON is most of the cost of reading an order.
    public func order(id: String, includingItems: Bool) throws(StorageError) -> Order? {
        try readSession { connection in
            try connection.cached("SELECT \(StoreSQL.orderColumns) FROM orders WHERE id = ?").firstRow([.text(id)]) {
                try StoreSQL.decodeOrder($0, withItems: includingItems)
            }
        }
    }

    /// The open orders assigned to a rider, without their items, oldest first: what one position of
    /// that rider moves.
    public func openOrders(merchantID: String, riderID: String, limit: Int) throws(StorageError) -> [Order] {
        try readSession { connection in
            try connection.cached(StoreSQL.openOrdersOfRider).rows([
                .text(merchantID), .text(riderID), .integer(Int64(limit)),
            ]) {
                try StoreSQL.decodeOrder($0, withItems: false)
            }
        }
    }

    /// Stores what positions told of some rides, in one transaction, and queues a push to every live
    /// activity of the orders whose shown state changed; an order closed or given to another rider
    /// meanwhile is left alone.
    /// - Returns: the pushes queued.
    public func recordRides(_ updates: [RideUpdate], now: Date) throws(StorageError) -> Int {
        guard !updates.isEmpty else { return 0 }
        return try writeSQL { connection in
            var queued = 0
            for update in updates {
                try connection.cached(
                    """
                    UPDATE orders SET ride_position_at = ?, ride_remaining_m = ?, ride_initial_m = ?, ride_eta = ?
                    WHERE id = ? AND rider_id = ? AND status NOT IN ('delivered', 'cancelled')
                    """
                ).run(StoreSQL.rideValues(update.tracking) + [.text(update.orderID), .text(update.riderID)])
                guard update.queuesPushes, connection.changes > 0 else { continue }
                queued += try StoreSQL.enqueueToLiveActivities(
                    orderID: update.orderID, carryingLatestEvent: false, now: now, requestID: nil, connection
                ).count
            }
            return queued
        }
    }

    /// Gives an order a new tracking token (its hash): the old token stops working with this commit.
    /// - Returns: whether the order exists.
    @discardableResult
    public func replaceTrackingToken(orderID: String, hash: String) throws(StorageError) -> Bool {
        try writeSQL { connection in
            try connection.cached("UPDATE orders SET tracking_token_hash = ? WHERE id = ?").run([
                .text(hash), .text(orderID),
            ])
            return connection.changes > 0
        }
    }

    /// The order a customer's tracking token opens: three columns, not the order, for a poll reads
    /// the order itself right after.
    public func trackedOrder(trackingTokenHash: String) throws(StorageError) -> TrackedOrder? {
        try readSession { connection in
            try connection.cached("SELECT id, status, updated_at FROM orders WHERE tracking_token_hash = ?")
                .firstRow([.text(trackingTokenHash)]) { row in
                    let id = try row.text("id")
                    let statusText = try row.text("status")
                    guard let status = OrderStatus(rawValue: statusText) else {
                        throw StorageError("order \(id) has an unknown status \(statusText)")
                    }
                    return TrackedOrder(
                        id: id, status: status, updatedAt: Date(storageMilliseconds: try row.int("updated_at")))
                }
        }
    }

    /// The order's history, oldest first.
    public func events(orderID: String) throws(StorageError) -> [OrderEvent] {
        try readSession { connection in
            try connection.cached(
                "SELECT order_id, kind, from_status, to_status, actor, at, reason FROM order_events WHERE order_id = ? ORDER BY id"
            ).rows([.text(orderID)]) { row in
                OrderEvent(
                    orderID: try row.text("order_id"), kind: try row.value("kind"), from: try row.value("from_status"),
                    to: try row.value("to_status"), actor: try row.text("actor"),
                    at: Date(storageMilliseconds: try row.int("at")), reason: try row.optionalText("reason")
                )
            }
        }
    }

    /// How many orders are in each status.
    public func orderCountsByStatus() throws(StorageError) -> [OrderStatus: Int] {
        try readSession { connection in
            var counts: [OrderStatus: Int] = [:]
            let rows = try connection.cached("SELECT status, count(*) AS total FROM orders GROUP BY status").rows([]) {
                row in (try row.value("status", as: OrderStatus.self), Int(try row.int("total")))
            }
            for (status, count) in rows { counts[status] = count }
            return counts
        }
    }

    /// Per open status, the order that changed least recently, and how many orders are in it.
    public func oldestOpenOrders() throws(StorageError) -> [OpenOrderAge] {
        try readSession { connection in
            try connection.cached(
                """
                SELECT o.status, o.id, o.merchant_id, o.number, o.updated_at, s.total FROM (
                    SELECT status, min(updated_at) AS oldest, count(*) AS total FROM orders
                    WHERE status NOT IN ('delivered', 'cancelled') GROUP BY status
                ) AS s
                JOIN orders AS o ON o.id = (
                    SELECT id FROM orders WHERE status = s.status AND updated_at = s.oldest ORDER BY id LIMIT 1)
                ORDER BY o.updated_at
                """
            ).rows([]) { row in
                OpenOrderAge(
                    status: try row.value("status"), orderID: try row.text("id"),
                    merchantID: try row.text("merchant_id"),
                    number: try row.text("number"), since: Date(storageMilliseconds: try row.int("updated_at")),
                    count: Int(try row.int("total"))
                )
            }
        }
    }

    /// Orders whose id or number is `text` exactly, newest first: what support staff type when a
    /// customer calls (a number can repeat across merchants).
    public func orderIDs(matching text: String, limit: Int) throws(StorageError) -> [String] {
        try readSession { connection in
            try connection.cached(
                "SELECT id FROM orders WHERE id = ?1 OR number = ?1 ORDER BY created_at DESC, id LIMIT ?2"
            ).rows([.text(text), .integer(Int64(limit))]) { try $0.text("id") }
        }
    }

    /// Open orders per merchant, most first.
    public func openOrderCountsByMerchant(limit: Int) throws(StorageError) -> [MerchantOpenOrders] {
        try readSession { connection in
            try connection.cached(
                """
                SELECT merchant_id, count(*) AS open FROM orders
                WHERE status IN ('placed', 'preparing', 'pickup', 'delivering')
                GROUP BY merchant_id ORDER BY count(*) DESC, merchant_id LIMIT ?
                """
            ).rows([.integer(Int64(limit))]) { row in
                MerchantOpenOrders(merchantID: try row.text("merchant_id"), openOrders: Int(try row.int("open")))
            }
        }
    }
}

extension StoreSQL {
    /// A rider's open orders, read on every position the rider posts: its terms are those of the
    /// partial index `orders_open_by_rider` (migration 0014), which holds only open orders in this
    /// order, so that neither a rider's history nor a sort is read.
    static let openOrdersOfRider = """
        SELECT \(orderColumns) FROM orders
        WHERE merchant_id = ? AND rider_id = ? AND status NOT IN ('delivered', 'cancelled')
        ORDER BY created_at, id LIMIT ?
        """

    static let orderColumns = """
        id, merchant_id, number, merchant_name, items_json, customer_id, customer_name, customer_phone,
        customer_locale, address, payment_method, payment_brand, payment_last4, note, status, cancelled_at_status,
        estimated_arrival, rider_id, rider_name, rider_phone, created_at, updated_at, destination_latitude,
        destination_longitude, ride_position_at, ride_remaining_m, ride_initial_m, ride_eta
        """

    /// The INSERT of a whole order row (`orderColumns` and its tracking token's hash).
    static let insertOrder =
        "INSERT INTO orders (\(orderColumns), tracking_token_hash) VALUES ("
        + Array(repeating: "?", count: orderColumns.split(separator: ",").count + 1).joined(separator: ", ") + ")"

    /// Outbox rows still waiting to be sent, written so that the planner uses the index of open rows
    /// (its predicate is `state IN ('pending', 'sending')`).
    static let pendingRows = "state IN ('pending', 'sending') AND state = 'pending'"

    /// The columns every queued push is inserted with.
    private static let insertIntoOutbox =
        "INSERT INTO outbox (order_id, event_id, kind, target_id, state, due_at, created_at, updated_at, request_id)"

    /// The activities of an order that a push can reach (the order's id its one parameter).
    private static let liveActivitiesOfOrder = "order_id = ? AND ended_at IS NULL AND push_token != ''"

    /// Queues a push to each live activity of an order, superseding their pending ones, and counts
    /// them. One read finds the activities (and the event), then each gets the two writes of
    /// `enqueue`. On SQLite's writer this takes two thirds of the instructions of an `UPDATE` with a
    /// subquery over the activities and an `INSERT … SELECT … RETURNING`; on PostgreSQL the read is
    /// a wait on the server, which a status change leaves out (`enqueueToLiveActivitiesWithoutWaiting`)
    /// and rides, whose count is a metric, pay.
    /// - Parameter carryingLatestEvent: the rows name the order's newest event as their cause: the
    ///   one the caller's transaction appended, since it holds the order's lock.
    /// - Returns: how many were queued, and the event they carry.
    static func enqueueToLiveActivities(
        orderID: String, carryingLatestEvent: Bool, now: Date, requestID: String?, _ connection: any SQLSession
    ) throws -> (count: Int, eventID: Int64?) {
        let event = carryingLatestEvent ? "(SELECT max(id) FROM order_events WHERE order_id = ?)" : "NULL"
        let live = try connection.cached(
            "SELECT activity_id, \(event) AS event_id FROM activities WHERE \(liveActivitiesOfOrder)"
        ).rows(carryingLatestEvent ? [.text(orderID), .text(orderID)] : [.text(orderID)]) {
            (activityID: try $0.text("activity_id"), eventID: try $0.optionalInt("event_id"))
        }
        for activity in live {
            try enqueue(
                orderID: orderID, eventID: activity.eventID, target: .activity(activityID: activity.activityID),
                now: now, requestID: requestID, connection)
        }
        return (live.count, live.first?.eventID)
    }

    /// `enqueueToLiveActivities` in two statements sent without waiting, whatever the number of
    /// activities, counting nothing: a supersede of the pending pushes of the live activities, and
    /// an insert of one push for each (naming the order's newest event, when `carryingLatestEvent`).
    static func enqueueToLiveActivitiesWithoutWaiting(
        orderID: String, carryingLatestEvent: Bool, now: Date, requestID: String?, _ connection: any SQLSession
    ) throws {
        let millis = Int64(now.storageMilliseconds)
        try connection.send(
            """
            UPDATE outbox SET state = 'superseded', updated_at = ?
            WHERE order_id = ? AND kind = 'activity' AND \(pendingRows)
                AND target_id IN (SELECT activity_id FROM activities WHERE \(liveActivitiesOfOrder))
            """, [.integer(millis), .text(orderID), .text(orderID)])
        let event =
            carryingLatestEvent
            ? "(SELECT max(id) FROM order_events AS event WHERE event.order_id = activities.order_id)" : "NULL"
        try connection.send(
            """
            \(insertIntoOutbox)
            SELECT order_id, \(event), 'activity', activity_id, 'pending', ?, ?, ?, ?
            FROM activities WHERE \(liveActivitiesOfOrder)
            """,
            [
                .integer(millis), .integer(millis), .integer(millis), requestID.map(DatabaseValue.text) ?? .null,
                .text(orderID),
            ])
    }

    /// The INSERT of an event, with the values `eventValues` gives.
    static let insertEvent = """
        INSERT INTO order_events (order_id, kind, from_status, to_status, actor, at, reason, request_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """

    static func eventValues(_ event: OrderEvent, requestID: String?) -> [DatabaseValue] {
        [
            .text(event.orderID), .text(event.kind.rawValue), .text(event.from.rawValue), .text(event.to.rawValue),
            .text(event.actor), .integer(event.at.storageMilliseconds), event.reason.map(DatabaseValue.text) ?? .null,
            requestID.map(DatabaseValue.text) ?? .null,
        ]
    }

    static func insert(_ event: OrderEvent, requestID: String? = nil, _ connection: any SQLSession) throws -> Int64 {
        let id = try connection.cached(insertEvent + " RETURNING id").firstRow(eventValues(event, requestID: requestID))
        {
            try $0.int("id")
        }
        guard let id else { throw StorageError("the event of order \(event.orderID) was not inserted") }
        return id
    }

    /// Queues a push, superseding the target's older pending rows: only the newest state is sent.
    static func enqueue(
        orderID: String, eventID: Int64?, target: OutboxTarget, now: Date, dueAt: Date? = nil, requestID: String?,
        _ connection: any SQLSession
    )
        throws
    {
        let millis = Int64(now.storageMilliseconds)
        let due = max(millis, dueAt?.storageMilliseconds ?? millis)
        try connection.send(
            """
            UPDATE outbox SET state = 'superseded', updated_at = ?
            WHERE order_id = ? AND kind = ? AND target_id = ? AND \(pendingRows)
            """, [.integer(millis), .text(orderID), .text(target.kind), .text(target.targetID)])
        try connection.send(
            """
            \(insertIntoOutbox)
            VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)
            """,
            [
                .text(orderID), eventID.map(DatabaseValue.integer) ?? .null, .text(target.kind),
                .text(target.targetID), .integer(due), .integer(millis), .integer(millis),
                requestID.map(DatabaseValue.text) ?? .null,
            ])
    }

    static func encode(_ order: Order) -> [DatabaseValue] {
        let itemsJSON = StoredItems.encode(order.items)
        return [
            .text(order.id), .text(order.merchantID), .text(order.number), .text(order.merchantName), .text(itemsJSON),
            .text(order.customer.id), .text(order.customer.name), .text(order.customer.phone),
            .text(order.customer.locale), .text(order.address), .text(order.payment.method),
            order.payment.brand.map(DatabaseValue.text) ?? .null, order.payment.last4.map(DatabaseValue.text) ?? .null,
            order.note.map(DatabaseValue.text) ?? .null, .text(order.status.rawValue),
            order.cancelledAt.map { .text($0.rawValue) } ?? .null, .integer(order.estimatedArrival.storageMilliseconds),
            order.rider.map { .text($0.id) } ?? .null, order.rider.map { .text($0.name) } ?? .null,
            order.rider?.phone.map(DatabaseValue.text) ?? .null, .integer(order.createdAt.storageMilliseconds),
            .integer(order.updatedAt.storageMilliseconds), order.destination.map { .real($0.latitude) } ?? .null,
            order.destination.map { .real($0.longitude) } ?? .null,
        ] + rideValues(order.tracking)
    }

    /// `ride_position_at, ride_remaining_m, ride_initial_m, ride_eta`.
    static func rideValues(_ ride: DeliveryTracking?) -> [DatabaseValue] {
        [
            ride.map { .integer($0.positionAt.storageMilliseconds) } ?? .null,
            ride?.remainingDistance.map(DatabaseValue.real) ?? .null,
            ride?.initialDistance.map(DatabaseValue.real) ?? .null,
            ride?.estimatedArrival.map { .integer($0.storageMilliseconds) } ?? .null,
        ]
    }

    static func decodeOrder(_ row: any DatabaseRow) throws -> Order {
        try decodeOrder(row, withItems: true)
    }

    /// - Parameter withItems: `false` leaves `items` empty, for readers that never show them (the
    ///   pusher's projection): decoding the items' JSON is most of the cost of reading an order.
    static func decodeOrder(_ row: any DatabaseRow, withItems: Bool) throws -> Order {
        let items = withItems ? try StoredItems.decode(try row.text("items_json")) : []
        let id = try row.text("id")
        let statusText = try row.text("status")
        guard let status = OrderStatus(rawValue: statusText) else {
            throw StorageError("order \(id) has an unknown status \(statusText)")
        }
        let destination = try row.optionalDouble("destination_latitude").map { latitude in
            Coordinate(latitude: latitude, longitude: try row.double("destination_longitude"))
        }
        let tracking = try decodeTracking(row)
        return Order(
            id: id, merchantID: try row.text("merchant_id"), number: try row.text("number"),
            merchantName: try row.text("merchant_name"),
            items: items,
            customer: Customer(
                id: try row.text("customer_id"), name: try row.text("customer_name"),
                phone: try row.text("customer_phone"), locale: try row.text("customer_locale")),
            address: try row.text("address"),
            payment: Payment(
                method: try row.text("payment_method"), brand: try row.optionalText("payment_brand"),
                last4: try row.optionalText("payment_last4")),
            note: try row.optionalText("note"), status: status,
            cancelledAt: try row.optionalText("cancelled_at_status").flatMap(OrderStatus.init(rawValue:)),
            estimatedArrival: Date(storageMilliseconds: try row.int("estimated_arrival")),
            rider: try row.optionalText("rider_id").map { riderID in
                Rider(id: riderID, name: try row.text("rider_name"), phone: try row.optionalText("rider_phone"))
            },
            createdAt: Date(storageMilliseconds: try row.int("created_at")),
            updatedAt: Date(storageMilliseconds: try row.int("updated_at")),
            destination: destination, tracking: tracking
        )
    }
}

extension StoreSQL {
    /// The ride an order's row holds, if a position of its rider was seen.
    static func decodeTracking(_ row: any DatabaseRow) throws -> DeliveryTracking? {
        try row.optionalInt("ride_position_at").map { at in
            DeliveryTracking(
                positionAt: Date(storageMilliseconds: at),
                remainingDistance: try row.optionalDouble("ride_remaining_m"),
                initialDistance: try row.optionalDouble("ride_initial_m"),
                estimatedArrival: try row.optionalInt("ride_eta").map(Date.init(storageMilliseconds:)))
        }
    }
}

/// Line items as stored in `orders.items_json`: `[{"name":…,"price":…,"quantity":…}]`. Read on every
/// locked order of a status change, so neither way goes through Foundation's coders; rows written by
/// earlier versions (`JSONEncoder`, any key order, `\/` escapes) read the same.
enum StoredItems {
    static func encode(_ items: [LineItem]) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "{"))
            JSONText.appendField("name", item.name, to: &bytes, first: true)
            bytes += Array(",\"price\":".utf8)
            bytes += Array(number(item.price).utf8)
            bytes += Array(",\"quantity\":".utf8)
            bytes += Array(String(item.quantity).utf8)
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }

    static func decode(_ text: String) throws(StorageError) -> [LineItem] {
        if let items = decodeOwnLayout(text) { return items }
        let parsed: ParsedJSON
        do {
            parsed = try JSONParser.parse(Array(text.utf8))
        } catch {
            throw StorageError("an order's items are not valid JSON: \(error)")
        }
        guard case .array(let elements) = parsed else { throw StorageError("an order's items are not a JSON array") }
        var items: [LineItem] = []
        items.reserveCapacity(elements.count)
        for element in elements {
            guard case .object(let fields) = element, case .string(let name)? = fields["name"],
                case .number(let quantity)? = fields["quantity"], let count = Int(exactly: quantity),
                case .number(let price)? = fields["price"]
            else { throw StorageError("an order's item is not {name, quantity, price}") }
            items.append(LineItem(name: name, quantity: count, price: price))
        }
        return items
    }

    /// Reads the layout `encode` writes without building a JSON tree (the general parser's
    /// dictionaries were half of the cost of reading a locked order, on the writer's thread);
    /// `nil` for anything else (an escape in a name, another key order), which the general parser
    /// reads. Spaces between tokens are skipped.
    static func decodeOwnLayout(_ text: String) -> [LineItem]? {
        var text = text
        return text.withUTF8 { bytes -> [LineItem]? in
            var reader = LayoutReader(bytes: bytes)
            guard reader.take("[") else { return nil }
            var items: [LineItem] = []
            if reader.take("]") {
                reader.skipSpaces()
                return reader.atEnd ? items : nil
            }
            repeat {
                guard reader.take("{"), reader.take(#""name""#), reader.take(":"), let name = reader.plainString(),
                    reader.take(","), reader.take(#""price""#), reader.take(":"), let price = reader.number(),
                    reader.take(","), reader.take(#""quantity""#), reader.take(":"), let quantity = reader.number(),
                    let count = Int(exactly: quantity), reader.take("}")
                else { return nil }
                items.append(LineItem(name: name, quantity: count, price: price))
            } while reader.take(",")
            guard reader.take("]") else { return nil }
            reader.skipSpaces()
            return reader.atEnd ? items : nil
        }
    }

    /// A cursor over the bytes of `encode`'s layout.
    private struct LayoutReader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func skipSpaces() {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") { index += 1 }
        }

        /// Moves past `expected` (and the spaces before it) if the text goes on with it.
        mutating func take(_ expected: StaticString) -> Bool {
            skipSpaces()
            let count = expected.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != expected.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// A quoted string without escapes or control characters, as `encode` writes most names.
        mutating func plainString() -> String? {
            skipSpaces()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            let start = index + 1
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                guard bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 else { return nil }
                end += 1
            }
            guard end < bytes.count else { return nil }
            index = end + 1
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }

        /// A number as `encode` writes one: digits, sign, point and exponent.
        mutating func number() -> Double? {
            skipSpaces()
            let start = index
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                    UInt8(ascii: "e"), UInt8(ascii: "E"):
                    index += 1
                default:
                    return index > start
                        ? Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                        : nil
                }
            }
            return nil
        }
    }

    /// A price as JSON: whole numbers without a fraction, others in Swift's shortest exact form.
    private static func number(_ value: Double) -> String {
        value.isFinite ? (value.rounded() == value && abs(value) < 9e15 ? String(Int64(value)) : "\(value)") : "0"
    }
}
