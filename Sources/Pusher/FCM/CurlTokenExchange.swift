public import Foundation

/// The JWT bearer grant over HTTPS with libcurl: one POST an hour per service account, on a
/// connection of its own.
public struct CurlTokenExchange: FCMTokenExchange {
    private let caFile: String?
    private let timeoutMilliseconds: Int

    /// - Parameter caFile: CA bundle to trust (tests point it at their own CA); `nil` for the system store.
    public init(caFile: String? = nil, timeoutMilliseconds: Int = 10_000) {
        self.caFile = caFile
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    public func exchange(assertion: String, at url: String) throws(FCMAuthenticationError) -> (
        token: String, lifetime: TimeInterval
    ) {
        let client: CurlMultiplexer
        do {
            client = try CurlMultiplexer(
                caFile: caFile, timeoutMilliseconds: timeoutMilliseconds, connectionsPerHost: 1,
                maximumIdleSeconds: 60, keptHeaders: [])
        } catch {
            throw FCMAuthenticationError(description: "\(error)", isTransient: true)
        }
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let answer = client.perform([
            CurlMultiplexer.Request(
                url: url, headers: ["content-type: application/x-www-form-urlencoded"], body: Array(body.utf8))
        ])[0]
        if let transportError = answer.transportError {
            throw FCMAuthenticationError(description: "token endpoint: \(transportError)", isTransient: true)
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any] ?? [:]
        guard answer.status == 200, let token = object["access_token"] as? String, !token.isEmpty else {
            // OAuth's error code (invalid_grant: a revoked key, a clock far off) and its description.
            let reason = [object["error"], object["error_description"]].compactMap { $0 as? String }
                .joined(separator: ": ")
            throw FCMAuthenticationError(
                description: "token endpoint answered \(answer.status)" + (reason.isEmpty ? "" : " (\(reason))"),
                isTransient: answer.status == 429 || answer.status >= 500)
        }
        let lifetime = (object["expires_in"] as? Double) ?? 3600
        return (token, lifetime)
    }
}
