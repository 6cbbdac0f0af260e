import Foundation
import Storage
import Testing

/// A phone that changes hands: the latest registration of a push-to-start token for an app wins, so
/// nobody's order starts an activity on someone else's lock screen, across customers and merchants.
@Suite("Shared phones")
struct SharedPhoneTests {
    @Test func theLatestRegistrationOfATokenWins() throws {
        let api = try APIHarness()
        let (merchantA, merchantB) = (
            try api.key("merchant", merchant: "m-1"), try api.key("merchant", merchant: "m-2")
        )
        let first = try api.customerCredential(merchantA, customer: "c-1").credential
        let second = try api.customerCredential(merchantA, customer: "c-2").credential
        let otherMerchants = try api.customerCredential(merchantB, customer: "c-9").credential
        let phone = "aabbccddeeff00112233445566778899"
        func register(_ credential: String, _ customer: String, device: String, token: String = phone) throws {
            let reply = try api.send(
                "PUT", "/v1/customers/\(customer)/push-to-start/\(device)", as: credential,
                json: ["pushToken": token, "environment": "production"])
            try #require(reply.status == 200, "\(reply.status)")
        }
        /// The devices a new order of `customer` starts an activity on.
        func startsOfANewOrder(_ merchant: String, _ customer: String, _ number: String) throws -> [String] {
            _ = try api.createOrder(merchant, number: number, customer: customer)
            return try api.store.claimDue(owner: "test", now: api.now.addingTimeInterval(1), lease: 60, limit: 100)
                .compactMap { item in
                    if case .start(_, let deviceID) = item.target { return deviceID }
                    return nil
                }.sorted()
        }

        try register(first, "c-1", device: "phone")
        try register(first, "c-1", device: "tablet", token: "00112233445566778899aabbccddeeff")
        #expect(try startsOfANewOrder(merchantA, "c-1", "A-1") == ["phone", "tablet"])

        // Another customer of the same merchant signs in on the phone.
        try register(second, "c-2", device: "phone-of-c-2")
        #expect(try startsOfANewOrder(merchantA, "c-1", "A-2") == ["tablet"], "c-1's order starts on the phone")
        #expect(try startsOfANewOrder(merchantA, "c-2", "A-3") == ["phone-of-c-2"])

        // Then a customer of another merchant whose app is the same.
        try register(otherMerchants, "c-9", device: "phone")
        #expect(try startsOfANewOrder(merchantA, "c-2", "A-4") == [])
        #expect(try startsOfANewOrder(merchantB, "c-9", "B-1") == ["phone"])
        #expect(
            try api.store.pushToStart(DeviceKey(merchantID: "m-1", customerID: "c-1", deviceID: "tablet")) != nil,
            "another token of the first customer is left alone")
    }
}
