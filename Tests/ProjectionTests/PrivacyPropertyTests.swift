import DeliveryActivityContract
import FoundationEssentials
import Glibc
import OrderDomain
import Projection
import Testing

/// A small seeded generator, so a failing case can be reproduced from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Contact and payment details in the shapes people type them.
enum Secrets {
    static let phoneFormats = [
        "+49 30 #######", "(030) ###-####", "+1-202-555-####", "020 #### ####", "+86 138 #### ####", "138########",
        "+33 6 ## ## ## ##", "0049.30.#######", "+44 (0)20 #### ####", "+39 06 #######", "0151/########",
        "+81-3-####-####",
    ]
    static let cardFormats = ["#### #### #### ####", "####-####-####-####", "################", "#### ###### #####"]
    static let words = [
        "Pizza", "Roma", "Sushi", "Bar", "Marco", "Ana", "Lee", "Café", "北京", "Döner", "No.", "7", "24/7",
    ]

    static func digits(_ pattern: String, _ rng: inout SplitMix64) -> String {
        String(pattern.map { $0 == "#" ? Character(String(Int.random(in: 0...9, using: &rng))) : $0 })
    }

    static func fullwidth(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    scalar.properties.numericType == .decimal ? Unicode.Scalar(scalar.value + 0xFF10 - 0x30)! : scalar
                }
            )
        )
    }

    /// One secret: a phone number, a card number or an e-mail address.
    static func make(_ rng: inout SplitMix64) -> String {
        switch Int.random(in: 0..<7, using: &rng) {
        case 0, 1, 2: return digits(phoneFormats.randomElement(using: &rng)!, &rng)
        case 3: return fullwidth(digits(phoneFormats.randomElement(using: &rng)!, &rng))
        case 4, 5: return digits(cardFormats.randomElement(using: &rng)!, &rng)
        default:
            let local = ["ana.lima", "m_rossi", "first+tag", "x"].randomElement(using: &rng)!
            let domain = ["example.com", "mail.example.co.uk", "b.io"].randomElement(using: &rng)!
            return "\(local)\(Int.random(in: 0...99, using: &rng))@\(domain)"
        }
    }

    /// Free text with a secret somewhere in it.
    static func text(with secret: String, _ rng: inout SplitMix64) -> String {
        let before = (0..<Int.random(in: 0...2, using: &rng)).map { _ in words.randomElement(using: &rng)! }
        let after = (0..<Int.random(in: 0...2, using: &rng)).map { _ in words.randomElement(using: &rng)! }
        return (before + [secret] + after).joined(separator: " ")
    }
}

@Suite("Privacy of the projection")
struct PrivacyPropertyTests {
    /// 100,000 random orders with contact and card data in every private and free-text field: no push
    /// payload (APNs update, APNs start, Android message) contains any of it, and no text in them
    /// holds a run of 7 or more digits.
    @Test func noPrivateDataLeaves() throws {
        var rng = SplitMix64(state: 0x5EED_2026)
        let planner = PushPlanner()
        let projector = LiveActivityProjector()
        let statuses = OrderStatus.allCases
        for iteration in 0..<100_000 {
            var secrets: [String] = []
            func secretText() -> String {
                let secret = Secrets.make(&rng)
                secrets.append(secret)
                return Secrets.text(with: secret, &rng)
            }
            func secretOnly() -> String {
                let secret = Secrets.make(&rng)
                secrets.append(secret)
                return secret
            }
            let status = statuses.randomElement(using: &rng)!
            let order = Order(
                id: "o-\(iteration)", merchantID: "m-1", number: Bool.random(using: &rng) ? secretOnly() : "A-1",
                merchantName: secretText(), items: [LineItem(name: secretText(), quantity: 1, price: 1)],
                customer: Customer(
                    id: "c", name: secretText(), phone: secretOnly(),
                    locale: ["en", "de-DE", "zh-Hans"].randomElement(using: &rng)!
                ),
                address: secretText(),
                payment: Payment(method: "card", brand: "visa", last4: String(secretOnly().suffix(4))),
                note: secretText(), status: status, cancelledAt: status == .cancelled ? .pickup : nil,
                estimatedArrival: Fixtures.now.addingTimeInterval(Double(Int.random(in: 0...7200, using: &rng))),
                rider: Rider(id: "r", name: secretText(), phone: secretOnly()), createdAt: Fixtures.placedAt,
                updatedAt: Fixtures.placedAt
            )
            let activity = ActivityContext(bundleID: "com.example.app", startedAt: Fixtures.placedAt)
            var outputs: [String] = []
            for decision in [
                try planner.planUpdate(order: order, activity: activity, now: Fixtures.now),
                try planner.planStart(order: order, bundleID: "com.example.app", now: Fixtures.now),
            ] {
                if case .send(let push) = decision {
                    outputs.append(String(decoding: push.payload, as: UTF8.self))
                }
            }
            let android = AndroidLiveUpdate(
                attributes: projector.encode(projector.attributes(for: order)),
                contentState: projector.encode(projector.contentState(for: order)), version: Int64(iteration),
                event: status.isFinal ? .end : .update, highPriority: true, timeToLive: 3600)
            // The Android message carries the state as a string: its dates are digits inside text, so
            // it is searched for the secrets only (the state itself is the digit-checked payload's).
            guard let androidBody = android.requestBody(registrationToken: "device") else {
                Issue.record("iteration \(iteration): the Android message is over 4 KB")
                return
            }
            let needles: [(String, [[UInt8]])] = secrets.map { secret in
                let digitsOnly = String(secret.unicodeScalars.filter { $0.properties.numericType == .decimal })
                let forms = digitsOnly.unicodeScalars.count >= 7 ? [secret, digitsOnly] : [secret]
                return (secret, forms.map { Array($0.utf8) })
            }
            if let (secret, _) = needles.first(where: { $0.1.contains { Self.contains(androidBody, $0) } }) {
                Issue.record("seed iteration \(iteration) leaked \(secret) in the Android message")
                return
            }
            for output in outputs {
                let bytes = Array(output.utf8)
                if let (secret, _) = needles.first(where: { $0.1.contains { Self.contains(bytes, $0) } }) {
                    Issue.record("seed iteration \(iteration) leaked \(secret) in \(output)")
                    return
                }
                if Self.longestDigitRunInText(bytes) >= 7 {
                    Issue.record("seed iteration \(iteration): a 7+ digit run in \(output)")
                    return
                }
            }
        }
    }

    /// Whether `needle` occurs in `haystack`, through libc's `memchr` and `memcmp` (fast in debug builds).
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= haystack.count else { return needle.isEmpty }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                var offset = 0
                let lastStart = hay.count - pin.count
                while offset <= lastStart {
                    guard let found = memchr(hay.baseAddress! + offset, Int32(first), lastStart - offset + 1) else {
                        return false
                    }
                    let position = UnsafeRawPointer(found) - hay.baseAddress!
                    if memcmp(found, pin.baseAddress!, pin.count) == 0 { return true }
                    offset = position + 1
                }
                return false
            }
        }
    }

    /// The longest run of decimal digits (ASCII or fullwidth) inside the strings of a JSON payload:
    /// numbers (timestamps) are not text.
    static func longestDigitRunInText(_ bytes: [UInt8]) -> Int {
        var longest = 0
        var current = 0
        var inString = false
        var escaped = false
        return bytes.withUnsafeBufferPointer { buffer in
            var index = 0
            while index < buffer.count {
                let byte = buffer[index]
                if !escaped && byte == UInt8(ascii: "\"") {
                    inString.toggle()
                    current = 0
                } else if byte == UInt8(ascii: "\\") && !escaped {
                    escaped = true
                    index += 1
                    continue
                }
                escaped = false
                if inString {
                    if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                        current += 1
                    } else if byte == 0xEF, index + 2 < buffer.count, buffer[index + 1] == 0xBC,
                        (0x90...0x99).contains(buffer[index + 2])
                    {
                        current += 1
                        index += 2
                    } else {
                        current = 0
                    }
                    longest = max(longest, current)
                }
                index += 1
            }
            return longest
        }
    }
}
