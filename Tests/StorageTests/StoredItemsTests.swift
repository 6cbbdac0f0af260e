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

    /// What `encode` writes is read by the fast path, which agrees with the general parser; a name
    /// with an escape, or another layout, is left to the general parser.
    @Test func theWrittenLayoutIsReadWithoutTheGeneralParser() throws {
        let plain = [
            LineItem(name: "Margherita", quantity: 2, price: 8.5), LineItem(name: "Café 🍰", quantity: 1, price: 4),
            LineItem(name: "tiny", quantity: 3, price: 0.00001), LineItem(name: "", quantity: 0, price: -2.75),
        ]
        #expect(StoredItems.decodeOwnLayout(StoredItems.encode(plain)) == plain)
        #expect(StoredItems.decodeOwnLayout(StoredItems.encode([])) == [])
        #expect(
            StoredItems.decodeOwnLayout(#" [ {"name": "x", "price": 2, "quantity": 1} ] "#)
                == [LineItem(name: "x", quantity: 1, price: 2)])
        let escaped = [LineItem(name: "say \"hi\"", quantity: 1, price: 1)]
        #expect(StoredItems.decodeOwnLayout(StoredItems.encode(escaped)) == nil)
        #expect(try StoredItems.decode(StoredItems.encode(escaped)) == escaped)
        for text in [
            #"[{"price":1,"name":"x","quantity":1}]"#, #"[{"name":"x","price":1,"quantity":1.5}]"#,
            #"[{"name":"x","price":1,"quantity":1}"#, #"[{"name":"x","price":1,"quantity":1}]x"#,
            #"[{"name":"x","price":,"quantity":1}]"#, #"[{"name":"x\u0041","price":1,"quantity":1}]"#,
        ] {
            #expect(StoredItems.decodeOwnLayout(text) == nil, "\(text)")
        }
    }

    @Test func malformedItemsAreAStorageError() {
        for text in ["", "{}", #"[{"name":"x"}]"#, #"[{"name":"x","quantity":1.5,"price":1}]"#] {
            #expect(throws: StorageError.self) { try StoredItems.decode(text) }
        }
    }
}
