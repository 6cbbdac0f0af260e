internal import FoundationEssentials
internal import JSONSyntax
internal import Telemetry

/// A field of an event's `data`: events carry flat facts, never a nested copy of an order.
enum WebhookField: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case null

    static func optional(_ text: String?) -> WebhookField { text.map(WebhookField.string) ?? .null }
}

/// The JSON body of an event, in the Standard Webhooks form `{"type", "timestamp", "data"}`; written
/// once when the event happens and sent byte for byte on every attempt, which signatures need.
enum WebhookEventBody {
    static func encode(type: WebhookEventType, timestamp: Date, data: [(String, WebhookField)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"{"type":"#.utf8)
        JSONText.appendQuoted(type.rawValue, to: &out)
        out.append(contentsOf: #","timestamp":"#.utf8)
        JSONText.appendQuoted(iso8601(timestamp), to: &out)
        out.append(contentsOf: #","data":{"#.utf8)
        for (index, (key, value)) in data.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(key, to: &out)
            out.append(UInt8(ascii: ":"))
            switch value {
            case .string(let text): JSONText.appendQuoted(text, to: &out)
            case .integer(let number): out.append(contentsOf: String(number).utf8)
            case .null: out.append(contentsOf: "null".utf8)
            }
        }
        out.append(contentsOf: "}}".utf8)
        return out
    }

    /// RFC 3339 in UTC with milliseconds, as the Standard Webhooks examples write it.
    static func iso8601(_ date: Date) -> String {
        RFC3339Time.format(date)
    }

    /// A new event id: `msg_`, the time in 12 hex digits (ids sort by time) and 64 random bits in 16.
    /// Written digit by digit: this runs in the writer's transaction, once per event.
    static func newEventID(now: Date) -> String {
        var generator = SystemRandomNumberGenerator()
        let time = UInt64(max(0, now.storageMilliseconds))
        let random: UInt64 = generator.next()
        return String(unsafeUninitializedCapacity: 32) { id in
            /// The low `count` hex digits of `value`, most significant first, from `start`.
            func hex(_ value: UInt64, count: Int, at start: Int) {
                let digits: StaticString = "0123456789abcdef"
                for index in 0..<count {
                    id[start + index] = digits.utf8Start[Int((value >> (4 * (count - 1 - index))) & 0xf)]
                }
            }
            for (index, byte) in "msg_".utf8.enumerated() { id[index] = byte }
            hex(time, count: 12, at: 4)
            hex(random, count: 16, at: 16)
            return 32
        }
    }
}
