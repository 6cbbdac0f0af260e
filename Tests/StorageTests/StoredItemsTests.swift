import Foundation
import OrderDomain
import Testing

@testable import Storage

@Suite("Stored line items")
struct StoredItemsTests {
    /// Items read back as written, whatever their names hold.
    @Test func itemsRoundTrip() throws {
        let items = [
            LineItem(name: "Margherita \"large\"", quantity: 2, price: 12.5),
            LineItem(name: "Café / crème\n🍰", quantity: 1, price: 4),
            LineItem(name: "tiny", quantity: 3, price: 0.00001),
        ]
        #expect(try StoredItems.decode(StoredItems.encode(items)) == items)
        #expect(try StoredItems.decode(StoredItems.encode([])) == [])
    }

    /// Rows written by earlier versions (Foundation's encoder: another key order, `\/` escapes,
    /// whitespace from PostgreSQL) read the same.
    @Test func rowsOfEarlierVersionsRead() throws {
        struct Earlier: Encodable {
            let name: String
            let quantity: Int
            let price: Double
        }
        let earlier = String(
            decoding: try JSONEncoder().encode([Earlier(name: "a/b", quantity: 2, price: 3.25)]), as: UTF8.self)
        #expect(try StoredItems.decode(earlier) == [LineItem(name: "a/b", quantity: 2, price: 3.25)])
        #expect(
            try StoredItems.decode(#"[{"quantity": 1, "name": "x\/y", "price": 2}]"#)
                == [LineItem(name: "x/y", quantity: 1, price: 2)])
    }

    @Test func malformedItemsAreAStorageError() {
        for text in ["", "{}", #"[{"name":"x"}]"#, #"[{"name":"x","quantity":1.5,"price":1}]"#] {
            #expect(throws: StorageError.self) { try StoredItems.decode(text) }
        }
    }
}
