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

    /// A new event id: `msg_`, the time in hex (ids sort by time) and 64 random bits.
    static func newEventID(now: Date) -> String {
        var generator = SystemRandomNumberGenerator()
        let time = String(UInt64(max(0, now.storageMilliseconds)), radix: 16)
        let random = String(generator.next() as UInt64, radix: 16)
        return "msg_" + String(repeating: "0", count: max(0, 12 - time.count)) + time
            + String(repeating: "0", count: 16 - random.count) + random
    }
}
