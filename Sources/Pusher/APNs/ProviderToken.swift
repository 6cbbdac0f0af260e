public import Cryptography
public import Foundation
import JSONSyntax

/// The APNs provider token: a JWT with `alg` ES256, `kid` the key id, `iss` the team id, `iat` now.
///
/// Apple accepts a token for an hour and refuses new ones more often than every 20 minutes per
/// connection, so one token is minted per key and reused; `TokenCache` decides when.
public struct ProviderToken: Sendable, Hashable {
    public let keyID: String
    public let teamID: String
    public let issuedAt: Date
    /// The compact JWS, `header.claims.signature`, as sent after `bearer `.
    public let compact: String

    /// Mints a token signed by `key`.
    /// - Throws: `CryptoError` if signing fails.
    public init(keyID: String, teamID: String, issuedAt: Date, key: P256SigningKey) throws(CryptoError) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        // Two fixed objects, written directly; the ids are quoted and escaped like any JSON string.
        var header = Array(#"{"alg":"ES256""#.utf8)
        JSONText.appendField("kid", keyID, to: &header)
        header.append(UInt8(ascii: "}"))
        var claims = Array(#"{"iat":\#(Int64(issuedAt.timeIntervalSince1970.rounded(.down)))"#.utf8)
        JSONText.appendField("iss", teamID, to: &claims)
        claims.append(UInt8(ascii: "}"))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try key.signES256(Array(signingInput.utf8))
        self.compact = signingInput + "." + Base64URL.encode(signature)
    }
}

/// Base64 with the URL-safe alphabet and no padding, as JWS requires (RFC 7515 §2).
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}
