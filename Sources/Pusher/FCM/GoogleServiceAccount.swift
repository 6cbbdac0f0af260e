public import Cryptography
import Foundation

/// A Google service-account key, as the Firebase console downloads it (a JSON file): the account
/// that signs the assertion, its RSA key, the Firebase project it sends for, and where its access
/// tokens come from.
public struct GoogleServiceAccount: Sendable {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String?
    /// Google's token endpoint unless the file or a setting names another (tests, private deployments).
    public let tokenURL: String
    public let key: RSASigningKey

    /// Why a service-account file cannot be used; says which field is wrong, never the key.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// - Parameters:
    ///   - json: the file's bytes.
    ///   - tokenURL: replaces the file's `token_uri` (a setting, for tests and private deployments).
    /// - Throws: `Invalid` naming the missing or unusable field.
    public init(json: [UInt8], tokenURL: String? = nil) throws(Invalid) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else {
            throw Invalid(description: "not a JSON object")
        }
        func field(_ name: String) throws(Invalid) -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw Invalid(description: "\(name) is missing")
            }
            return value
        }
        guard try field("type") == "service_account" else {
            throw Invalid(description: "type is not service_account")
        }
        projectID = try field("project_id")
        clientEmail = try field("client_email")
        privateKeyID = object["private_key_id"] as? String
        let url: String
        if let tokenURL { url = tokenURL } else { url = try field("token_uri") }
        guard url.hasPrefix("https://") else { throw Invalid(description: "the token URL must start with https://") }
        self.tokenURL = url
        let pem = try field("private_key")
        do {
            key = try RSASigningKey(pem: pem)
        } catch {
            throw Invalid(description: "private_key is unusable: \(error.reason)")
        }
    }
}
