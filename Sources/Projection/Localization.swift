public import DeliveryActivityContract
public import OrderDomain

/// The languages the Live Activity's texts exist in; any other locale falls back to English.
public enum Language: String, Sendable, CaseIterable {
    case english = "en"
    case german = "de"
    case simplifiedChinese = "zh-Hans"

    /// Picks the language for a BCP 47 tag: `zh-Hans`, `zh-CN`, `zh-SG` and bare `zh` read simplified
    /// Chinese, `de-*` German, everything else (including `zh-Hant`, `zh-TW`) English.
    public init(localeTag: String) {
        // Language tags are ASCII: compare bytes, lower-casing letters, without building substrings.
        var subtags: [ArraySlice<UInt8>] = []
        let bytes = Array(localeTag.utf8.prefix(35)).map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        var start = 0
        for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "-") {
            subtags.append(bytes[start..<index])
            start = index + 1
        }
        if subtags[0].elementsEqual("de".utf8) {
            self = .german
        } else if subtags[0].elementsEqual("zh".utf8) {
            let traditional = subtags.dropFirst().contains { subtag in
                subtag.elementsEqual("hant".utf8) || subtag.elementsEqual("tw".utf8) || subtag.elementsEqual("hk".utf8)
                    || subtag.elementsEqual("mo".utf8)
            }
            self = traditional ? .english : .simplifiedChinese
        } else {
            self = .english
        }
    }

    /// The short status label, at most 24 characters.
    public func statusText(_ status: OrderStatus) -> String {
        switch (self, status) {
        case (.english, .placed): "Order placed"
        case (.english, .preparing): "Preparing your order"
        case (.english, .pickup): "Rider picking up"
        case (.english, .delivering): "On the way"
        case (.english, .delivered): "Delivered"
        case (.english, .cancelled): "Cancelled"
        case (.german, .placed): "Bestellt"
        case (.german, .preparing): "Wird zubereitet"
        case (.german, .pickup): "Wird abgeholt"
        case (.german, .delivering): "Unterwegs"
        case (.german, .delivered): "Zugestellt"
        case (.german, .cancelled): "Storniert"
        case (.simplifiedChinese, .placed): "已下单"
        case (.simplifiedChinese, .preparing): "商家备餐中"
        case (.simplifiedChinese, .pickup): "骑手取餐中"
        case (.simplifiedChinese, .delivering): "配送中"
        case (.simplifiedChinese, .delivered): "已送达"
        case (.simplifiedChinese, .cancelled): "已取消"
        }
    }

    /// Title and body of the alert that accompanies a push, built only from projected (scrubbed) fields.
    func alert(for status: OrderStatus, merchantName: String, riderName: String?) -> Alert {
        switch (self, status) {
        case (.english, .delivering):
            Alert(
                title: "On the way",
                body: riderName.map { "\($0) is bringing your order." } ?? "Your order is on the way.")
        case (.english, .delivered): Alert(title: "Delivered", body: "Your order from \(merchantName) has arrived.")
        case (.english, .cancelled):
            Alert(title: "Order cancelled", body: "Your order from \(merchantName) was cancelled.")
        case (.english, _): Alert(title: "Order placed", body: "\(merchantName) has received your order.")
        case (.german, .delivering):
            Alert(
                title: "Unterwegs",
                body: riderName.map { "\($0) bringt deine Bestellung." } ?? "Deine Bestellung ist unterwegs.")
        case (.german, .delivered): Alert(title: "Zugestellt", body: "Deine Bestellung von \(merchantName) ist da.")
        case (.german, .cancelled):
            Alert(title: "Storniert", body: "Deine Bestellung von \(merchantName) wurde storniert.")
        case (.german, _): Alert(title: "Bestellt", body: "\(merchantName) hat deine Bestellung erhalten.")
        case (.simplifiedChinese, .delivering):
            Alert(title: "配送中", body: riderName.map { "\($0)正在为您配送。" } ?? "您的订单正在配送中。")
        case (.simplifiedChinese, .delivered): Alert(title: "已送达", body: "您在\(merchantName)的订单已送达。")
        case (.simplifiedChinese, .cancelled): Alert(title: "已取消", body: "您在\(merchantName)的订单已取消。")
        case (.simplifiedChinese, _): Alert(title: "已下单", body: "\(merchantName)已收到您的订单。")
        }
    }
}

/// The visible text of a push's alert.
public struct Alert: Sendable, Hashable {
    public let title: String
    public let body: String
}
