import DeliveryActivityContract
import Foundation
import OrderDomain
import Storage
import TestSupport
import Testing

/// Customers' personal data does not outlive its use.
@Suite("Personal data: retention and erasure")
struct PersonalDataTests {
    /// What stands only in one customer's personal data, to look for in the files: words, and the
    /// destination's latitude as SQLite stores a REAL (8 bytes, big-endian).
    static let secrets: [(name: String, bytes: Data)] =
        ["Zebulon", "9876543", "Geheimweg", "Xanthippe", "7654321"].map { ($0, Data($0.utf8)) }
        + [("latitude 52.4242", withUnsafeBytes(of: (52.4242).bitPattern.bigEndian) { Data($0) })]

    /// An order of customer `customer` carrying every kind of personal data, moved to `status`.
    static func personalOrder(_ api: APIHarness, _ merchant: String, number: String, customer: String, status: String)
        throws -> String
    {
        var body = APIHarness.orderBody(number: number, customer: customer, now: api.now)
        body["customer"] = ["id": customer, "name": "Zebulon Quixote", "phone": "+49 30 9876543", "locale": "de-DE"]
        body["address"] = "Geheimweg 77, 10115 Berlin"
        body["note"] = "leave it with the neighbour Xanthippe"
        body["destination"] = ["latitude": 52.4242, "longitude": 13.3939]
        let created = try api.send("POST", "/v1/orders", as: merchant, json: body)
        let id = try #require((created.json["order"] as? [String: Any])?["id"] as? String)
        let rider = try api.send(
            "PUT", "/v1/orders/\(id)/rider", as: merchant,
            json: ["riderId": "r-1", "name": "Marco Rossi", "phone": "+39 333 7654321"])
        #expect(rider.status == 200)
        let changed = try api.send(
            "POST", "/v1/orders/\(id)/status", as: APIHarness.adminKey,
            json: ["status": status, "reason": "Zebulon asked for it"])
        #expect(changed.status == 200)
        return id
    }

    /// The bytes of the database's files.
    static func files(_ store: any DeliveryStore) throws -> Data {
        let database = try #require(store as? Database, "the files are SQLite's")
        return ["", "-wal", "-shm"].reduce(into: Data()) { all, suffix in
            all += (try? Data(contentsOf: URL(fileURLWithPath: database.path + suffix))) ?? Data()
        }
    }

    /// `DELETE …/personal-data` erases every order of that merchant's customer, open and ended, and
    /// afterwards no byte of it is left in the database's files; the orders' statuses stay, another
    /// customer's data and another merchant's customer of the same id are untouched.
    @Test(.enabled(if: !TestStore.usesPostgres, "reads SQLite's files"))
    func erasureLeavesNothingInTheFiles() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let ended = try Self.personalOrder(api, merchant, number: "E-1", customer: "c-9", status: "delivered")
        let open = try Self.personalOrder(api, merchant, number: "E-2", customer: "c-9", status: "delivering")
        let other = try api.createOrder(merchant, number: "E-3", customer: "c-10")
        let otherMerchant = try api.key("merchant", merchant: "m-2")
        let sameIDElsewhere = try api.createOrder(otherMerchant, number: "E-4", customer: "c-9")
        _ = try (api.store as? Database)?.checkpoint()
        for secret in Self.secrets {
            #expect(try Self.files(api.store).range(of: secret.bytes) != nil, "the test's data: \(secret.name)")
        }

        let reply = try api.send(
            "DELETE", "/v1/admin/merchants/m-1/customers/c-9/personal-data", as: APIHarness.adminKey)
        #expect(reply.status == 200)
        #expect(reply.json["erasedOrders"] as? Int == 2)

        let bytes = try Self.files(api.store)
        for secret in Self.secrets {
            #expect(bytes.range(of: secret.bytes) == nil, "\(secret.name) is still in the database's files")
        }
        let erased = try #require(try api.store.order(id: ended))
        #expect(erased.status == .delivered && erased.customer.phone.isEmpty && erased.address.isEmpty)
        #expect(erased.rider?.phone == nil && erased.destination == nil && erased.note == nil)
        #expect(try api.store.order(id: open)?.status == .delivering)
        #expect(try api.store.events(orderID: ended).map(\.to).last == .delivered, "the history stays")
        #expect(try api.store.events(orderID: ended).allSatisfy { $0.reason == nil })
        #expect(try api.store.order(id: other.id)?.customer.phone == "+49 30 1234567")
        #expect(try api.store.order(id: sameIDElsewhere.id)?.address.isEmpty == false)
    }

    /// The retention pass erases the personal data of orders ended longer ago than the retention
    /// time, and leaves orders ended since, and open ones, as they are.
    @Test func retentionErasesOnlyOrdersEndedLongAgo() throws {
        let api = try APIHarness()
        let merchant = try api.key("merchant", merchant: "m-1")
        let ended = try Self.personalOrder(api, merchant, number: "R-1", customer: "c-1", status: "delivered")
        let open = try Self.personalOrder(api, merchant, number: "R-2", customer: "c-2", status: "pickup")
        let policy = RetentionPolicy(personalData: 30 * 86_400)

        let early = try api.store.prune(now: api.now.addingTimeInterval(29 * 86_400), policy: policy)
        #expect(early.erasedOrders == 0)
        #expect(try api.store.order(id: ended)?.customer.name == "Zebulon Quixote")

        let late = try api.store.prune(now: api.now.addingTimeInterval(31 * 86_400), policy: policy)
        #expect(late.erasedOrders == 1)
        let erased = try #require(try api.store.order(id: ended))
        #expect(erased.customer.name.isEmpty && erased.customer.phone.isEmpty && erased.address.isEmpty)
        #expect(erased.payment.last4 == nil && erased.note == nil && erased.rider?.phone == nil)
        #expect(erased.status == .delivered && erased.number == "R-1")
        #expect(try api.store.order(id: open)?.customer.name == "Zebulon Quixote")
        #expect(try api.store.prune(now: api.now.addingTimeInterval(32 * 86_400), policy: policy).erasedOrders == 0)
    }
}
