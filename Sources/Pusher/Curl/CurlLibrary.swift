internal import CCurl

/// What the linked libcurl can do; the pusher refuses to start without HTTP/2, which APNs requires.
public struct CurlLibrary: Sendable, Equatable {
    public let version: String
    public let sslVersion: String
    public let nghttp2Version: String?
    public let supportsHTTP2: Bool

    /// Reads the linked library's version block (`curl_version_info`).
    public static let current: CurlLibrary = {
        guard let info = ccurl_version_info_now()?.pointee else {
            return CurlLibrary(version: "unknown", sslVersion: "none", nghttp2Version: nil, supportsHTTP2: false)
        }
        return CurlLibrary(
            version: info.version.map { String(cString: $0) } ?? "unknown",
            sslVersion: info.ssl_version.map { String(cString: $0) } ?? "none",
            nghttp2Version: info.nghttp2_version.map { String(cString: $0) },
            supportsHTTP2: info.features & CURL_VERSION_HTTP2 != 0
        )
    }()

    /// Throws when libcurl was built without HTTP/2 or TLS, naming what is missing.
    public func requireHTTP2() throws(PusherStartupError) {
        guard supportsHTTP2 else {
            throw PusherStartupError(
                "libcurl \(version) was built without HTTP/2; APNs speaks only HTTP/2 (install a libcurl with nghttp2)"
            )
        }
        guard sslVersion != "none" else {
            throw PusherStartupError("libcurl \(version) was built without TLS; APNs requires TLS 1.2 or newer")
        }
    }
}

/// Why the pusher cannot start; printed at start-up so that an operator can fix it.
public struct PusherStartupError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
