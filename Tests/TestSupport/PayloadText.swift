import Foundation

/// The text a push or message shows: every key and string value of its JSON, with strings that hold
/// JSON themselves (an FCM message's `state`) opened in turn. A check for private fields reads this,
/// not the raw bytes, so that a timestamp whose digits happen to hold a card's last four cannot fail
/// it (1796542421 holds 4242), and a private field leaked as text still does.
package enum PayloadText {
    package static func strings(inJSON text: String) -> [String] {
        guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        else { return [text] }
        return strings(in: value)
    }

    package static func strings(in value: Any) -> [String] {
        switch value {
        case let text as String:
            guard text.first == "{" || text.first == "[" else { return [text] }
            return [text] + strings(inJSON: text).filter { $0 != text }
        case let object as [String: Any]:
            return object.flatMap { [$0.key] + strings(in: $0.value) }
        case let array as [Any]:
            return array.flatMap { strings(in: $0) }
        default:
            return []
        }
    }
}
