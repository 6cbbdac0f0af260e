import DeliveryAPI
import Foundation
import OrderDomain
import Storage

/// `deliveryd keys create|list|revoke`: API key administration on the command line, for the first
/// keys of a deployment and for recovery when no admin key is at hand.
enum KeysCommand {
    static let usage = """
        usage: deliveryd keys create --role merchant|rider|admin [--merchant ID] [--rider ID] [--data-dir DIR]
               deliveryd keys list [--data-dir DIR]
               deliveryd keys revoke ID [--data-dir DIR]
        """

    /// The parsed command, and the arguments left for the configuration (`--data-dir`).
    enum Action: Equatable {
        case create(role: APIKeyRole, merchantID: String?, riderID: String?)
        case list
        case revoke(id: String)
    }

    /// Splits `keys …` arguments into the action and the remaining configuration flags.
    static func parse(_ arguments: [String]) -> (Action, [String])? {
        guard let verb = arguments.first else { return nil }
        var rest = Array(arguments.dropFirst())
        func take(_ flag: String) -> String?? {
            guard let index = rest.firstIndex(of: flag) else { return .some(nil) }
            guard index + 1 < rest.count else { return nil }
            let value = rest[index + 1]
            rest.removeSubrange(index...index + 1)
            return .some(value)
        }
        switch verb {
        case "create":
            guard let roleText = take("--role"), let role = roleText.flatMap(APIKeyRole.init(rawValue:)),
                let merchant = take("--merchant"), let rider = take("--rider")
            else { return nil }
            return (.create(role: role, merchantID: merchant, riderID: rider), rest)
        case "list":
            return (.list, rest)
        case "revoke":
            guard let id = rest.first, !id.hasPrefix("--") else { return nil }
            return (.revoke(id: id), Array(rest.dropFirst()))
        default:
            return nil
        }
    }

    /// Runs the action; returns the process exit status.
    static func run(_ action: Action, store: any DeliveryStore) -> Int32 {
        let now = Date()
        do {
            switch action {
            case .create(let role, let merchantID, let riderID):
                let issues = DeliveryService.bindingIssues(role: role, merchantID: merchantID, riderID: riderID)
                guard issues.isEmpty else {
                    printError("deliveryd keys: " + issues.map(\.description).joined(separator: "; "))
                    return 2
                }
                let (key, record) = Credentials.newAPIKey(
                    role: role, merchantID: merchantID, riderID: riderID, now: now)
                try store.createAPIKey(record)
                print("id\t\(record.id)\nrole\t\(role.rawValue)\nkey\t\(key)")
                printError("deliveryd keys: the key is shown only now; store it safely")
            case .list:
                print("id\trole\tmerchant\trider\tcreated\trevoked")
                for key in try store.apiKeys() {
                    let fields = [
                        key.id, key.role.rawValue, key.merchantID ?? "-", key.riderID ?? "-",
                        key.createdAt.formatted(.iso8601), key.revokedAt?.formatted(.iso8601) ?? "-",
                    ]
                    print(fields.joined(separator: "\t"))
                }
            case .revoke(let id):
                guard try store.revokeAPIKey(id: id, now: now) else {
                    printError("deliveryd keys: no live key with id \(id)")
                    return 1
                }
                print("revoked\t\(id)")
            }
            return 0
        } catch {
            printError("deliveryd keys: \(error)")
            return 1
        }
    }
}
