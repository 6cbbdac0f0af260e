internal import CCurl
internal import Foundation

/// One HTTP/2 POST at a time on a curl easy handle; owns the handle, its header list and the
/// response buffers. The client reuses transfers across requests: the options that never change are
/// set once, and `prepare` sets a request's URL, headers and body.
///
/// Lives only on the thread that drives the multi handle (not `Sendable`).
final class CurlTransfer {
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private(set) var index = 0
    private(set) var responseBody: [UInt8] = []
    /// The answer's headers asked for (lower-case names), without the rest.
    private let keptHeaders: [(name: String, prefix: [UInt8])]
    private(set) var keptHeaderValues: [String: String] = [:]
    private(set) var started = DispatchTime.now()
    /// The request body, owned here because `CURLOPT_POSTFIELDS` does not copy: allocated once (an
    /// APNs payload is at most 4 KB) and grown only for a larger body.
    private var bodyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)

    /// - Parameter maximumIdleSeconds: how long a connection may sit idle and still be reused (libcurl's
    ///   default, 118 s, would reconnect after every quiet two minutes; APNs wants connections kept
    ///   for hours). Idle connections send TCP keepalives, so a dead path is noticed while idle.
    /// - Throws: `APNsTransportError` if libcurl refuses an option (an old or odd build).
    /// - Parameter keptHeaders: lower-case names of the answer's headers to keep (`apns-id`).
    init(caFile: String?, timeoutMilliseconds: Int, maximumIdleSeconds: Int, keptHeaders: [String])
        throws(APNsTransportError)
    {
        guard let handle = curl_easy_init() else { throw APNsTransportError("curl_easy_init failed") }
        self.handle = handle
        self.keptHeaders = keptHeaders.map { ($0, Array(($0 + ":").utf8)) }
        let me = Unmanaged.passUnretained(self).toOpaque()
        var codes: [CURLcode] = [
            ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)),
            ccurl_easy_setopt_long(handle, CURLOPT_POST, 1),
            ccurl_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1),
            ccurl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds),
            ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            ccurl_easy_setopt_long(handle, CURLOPT_MAXAGE_CONN, maximumIdleSeconds),
            ccurl_easy_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1),
            ccurl_easy_setopt_long(handle, CURLOPT_TCP_KEEPIDLE, 60),
            ccurl_easy_setopt_long(handle, CURLOPT_TCP_KEEPINTVL, 30),
            ccurl_easy_setopt_write_function(handle, Self.onBody),
            ccurl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, me),
            ccurl_easy_setopt_header_function(handle, Self.onHeader),
            ccurl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, me),
            ccurl_easy_setopt_pointer(handle, CURLOPT_PRIVATE, me),
        ]
        if let caFile { codes.append(ccurl_easy_setopt_pointer(handle, CURLOPT_CAINFO, caFile)) }
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            curl_easy_cleanup(handle)
            throw APNsTransportError("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
    }

    /// Points the transfer at its next request and clears the last answer.
    func prepare(index: Int, url: String, headers: [String], body: [UInt8]) throws(APNsTransportError) {
        self.index = index
        responseBody.removeAll(keepingCapacity: true)
        if !keptHeaderValues.isEmpty { keptHeaderValues.removeAll(keepingCapacity: true) }
        started = DispatchTime.now()
        curl_slist_free_all(headerList)
        headerList = nil
        for header in headers { headerList = curl_slist_append(headerList, header) }
        var codes: [CURLcode] = [
            ccurl_easy_setopt_pointer(handle, CURLOPT_URL, url),
            ccurl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList),
            ccurl_easy_setopt_long(handle, CURLOPT_POSTFIELDSIZE, body.count),
        ]
        if body.count > bodyBuffer.count {
            bodyBuffer.deallocate()
            bodyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: body.count, alignment: 1)
        }
        bodyBuffer.copyBytes(from: body)
        codes.append(ccurl_easy_setopt_pointer(handle, CURLOPT_POSTFIELDS, UnsafeRawPointer(bodyBuffer.baseAddress)))
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            throw APNsTransportError("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        bodyBuffer.deallocate()
    }

    /// The HTTP status of the answer, 0 when none came.
    var status: Int {
        var code = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    private static let onBody: curl_write_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        data.withMemoryRebound(to: UInt8.self, capacity: length) {
            transfer.responseBody.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
        }
        return length
    }

    private static let onHeader: curl_write_callback = { data, size, count, context in
        guard let data, let context else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        // Only the headers asked for are kept: matching on bytes spares a string per header line.
        data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            let line = UnsafeBufferPointer(start: bytes, count: length)
            for (name, prefix) in transfer.keptHeaders {
                guard length > prefix.count,
                    zip(line.prefix(prefix.count), prefix).allSatisfy({ $0 | 0x20 == $1 || $0 == $1 })
                else { continue }
                let value = line[prefix.count...].drop { $0 == UInt8(ascii: " ") }
                let trimmed = value.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
                transfer.keptHeaderValues[name] = String(decoding: trimmed, as: UTF8.self)
            }
        }
        return length
    }
}

/// A failure below HTTP: no answer from APNs (connection refused, TLS, timeout, reset).
public struct APNsTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
