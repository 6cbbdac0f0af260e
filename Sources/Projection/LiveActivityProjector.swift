public import DeliveryActivityContract
import FoundationEssentials
public import OrderDomain

/// Maps an order to what its Live Activity shows, and nothing more.
///
/// The projection is a whitelist: it reads the status, stage, ETA, the merchant's name and number,
/// the rider's name and the ride's remaining distance, scrubs every piece of free text, and never
/// touches the customer, address, destination, payment or notes, so no change elsewhere can leak them.
/// Of the ride it shows a distance rounded to `distanceRounding` and nothing below `arrivingDistance`;
/// the rider's coordinates never reach it.
public struct LiveActivityProjector: Sendable {
    public let configuration: ProjectionConfiguration

    public init(configuration: ProjectionConfiguration = ProjectionConfiguration()) {
        self.configuration = configuration
    }

    /// The dynamic state for an order, in the customer's language.
    public func contentState(for order: Order) -> ContentState {
        withRide(of: order, on: baseContentState(for: order))
    }

    /// The state without the ride: what changes only when the order itself does (status, ETA, rider).
    public func baseContentState(for order: Order) -> ContentState {
        ContentState(
            status: order.status.rawValue,
            stage: order.stage,
            progress: Double(order.stage) / 4,
            statusText: Language(localeTag: order.customer.locale).statusText(order.status),
            estimatedArrival: roundedEstimatedArrival(order.estimatedArrival),
            riderName: order.rider.flatMap { firstName(of: $0.name) },
            // The order's last change is its end: delivered or cancelled orders take no other.
            endedAt: order.status.isFinal
                ? Date(timeIntervalSinceReferenceDate: Double(encodedDate(order.updatedAt))) : nil
        )
    }

    /// `base` (the order's `baseContentState`) with the order's ride applied: what a position
    /// changes, without scrubbing and localising the rest again for every position.
    public func withRide(of order: Order, on base: ContentState) -> ContentState {
        var state = base
        if order.status == .delivering, let ride = order.tracking, let distance = ride.remainingDistance {
            applyRide(distance: distance, initialDistance: ride.initialDistance, to: &state)
            if let eta = ride.estimatedArrival { state.estimatedArrival = roundedEstimatedArrival(eta) }
        }
        return state
    }

    /// The distance as shown (rounded, or `arriving`) and the progress measured by that shown
    /// distance, so that the progress moves only when the distance does.
    private func applyRide(distance: Double, initialDistance: Double?, to state: inout ContentState) {
        let shown: Double
        if distance < configuration.arrivingDistance {
            state.arriving = true
            shown = 0
        } else {
            let step = max(1, configuration.distanceRounding)
            let rounded = max(step, (distance / step).rounded() * step)
            state.remainingDistance = Int(rounded)
            shown = rounded
        }
        guard let initialDistance, initialDistance > 0 else { return }
        let done = min(1, max(0, 1 - shown / initialDistance))
        // From the delivering stage's 0.75 to 0.99: only `delivered` fills the bar.
        state.progress = ((0.75 + 0.24 * done) * 100).rounded() / 100
    }

    /// The static attributes, sent once when the activity starts; `orderId` lets an app woken by a
    /// `start` push register the new activity's token.
    public func attributes(for order: Order) -> DeliveryAttributes {
        DeliveryAttributes(
            orderId: order.id,
            orderNumber: Self.truncated(TextScrubber.scrub(order.number), to: configuration.orderNumberLimit),
            merchantName: Self.truncated(TextScrubber.scrub(order.merchantName), to: configuration.merchantNameLimit)
        )
    }

    /// The `content-state` object as ActivityKit decodes it: sorted keys, dates in seconds since 2001.
    public func encode(_ state: ContentState) -> [UInt8] {
        var writer = JSONWriter(capacity: 192)
        write(state, into: &writer)
        return writer.bytes
    }

    /// The `attributes` object of a start push: sorted keys.
    public func encode(_ attributes: DeliveryAttributes) -> [UInt8] {
        var writer = JSONWriter(capacity: 96)
        write(attributes, into: &writer)
        return writer.bytes
    }

    /// A stable 64-bit FNV-1a digest of the encoded state, as 16 hex digits.
    ///
    /// Equal states give equal bytes, so equal fingerprints: the pusher compares the fingerprint of a
    /// planned update with the last one sent for that activity and skips repeats.
    public func fingerprint(_ state: ContentState) -> String {
        Self.fingerprint(of: encode(state))
    }

    static func fingerprint(of bytes: some Sequence<UInt8>) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    func write(_ state: ContentState, into writer: inout JSONWriter) {
        writer.beginObject()
        if state.arriving {
            writer.member("arriving", true)
        }
        if let endedAt = state.endedAt {
            writer.member("endedAt", encodedDate(endedAt))
        }
        writer.member("estimatedArrival", encodedDate(state.estimatedArrival))
        writer.member("progress", state.progress)
        if let remainingDistance = state.remainingDistance {
            writer.member("remainingDistance", Int64(remainingDistance))
        }
        if let riderName = state.riderName {
            writer.member("riderName", riderName)
        }
        writer.member("stage", Int64(state.stage))
        writer.member("status", state.status)
        writer.member("statusText", state.statusText)
        writer.endObject()
    }

    func write(_ attributes: DeliveryAttributes, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("merchantName", attributes.merchantName)
        writer.member("orderId", attributes.orderId)
        writer.member("orderNumber", attributes.orderNumber)
        writer.endObject()
    }

    /// Whole seconds since 2001-01-01, what a default `JSONDecoder` reads into a `Date`; the state
    /// holds whole minutes anyway.
    func encodedDate(_ date: Date) -> Int64 {
        Int64(date.timeIntervalSinceReferenceDate.rounded())
    }

    /// The ETA rounded to `estimatedArrivalRounding`, so that tiny moves do not change the state.
    func roundedEstimatedArrival(_ date: Date) -> Date {
        let step = configuration.estimatedArrivalRounding
        guard step > 0 else { return date }
        return Date(timeIntervalSince1970: (date.timeIntervalSince1970 / step).rounded() * step)
    }

    /// The first word of a scrubbed name that has a letter in it and no mask, cut to the limit.
    func firstName(of name: String) -> String? {
        let scrubbed = TextScrubber.scrub(name)
        let bytes = scrubbed.utf8
        var wordStart = bytes.startIndex
        while wordStart < bytes.endIndex {
            let wordEnd = bytes[wordStart...].firstIndex(of: UInt8(ascii: " ")) ?? bytes.endIndex
            let word = Substring(scrubbed.utf8[wordStart..<wordEnd])
            // The mask is made of bullets (U+2022, UTF-8 E2 80 A2); the byte test skips the slow check for most words.
            let hasMask = bytes[wordStart..<wordEnd].contains(0xA2) && word.contains("•")
            if !hasMask, word.contains(where: \.isLetter) {
                return Self.truncated(String(word), to: configuration.riderNameLimit)
            }
            wordStart = wordEnd < bytes.endIndex ? bytes.index(after: wordEnd) : wordEnd
        }
        return nil
    }

    /// `text` cut to `limit` characters, the last replaced by `…` when anything was cut.
    static func truncated(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit, text.count > limit else { return text }
        guard limit > 1 else { return String(text.prefix(limit)) }
        return String(text.prefix(limit - 1)) + "…"
    }
}
