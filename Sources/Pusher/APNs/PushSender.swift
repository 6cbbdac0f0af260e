internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#endif

/// Sends a batch of pushes and answers for each, in order. The worker's thread owns its sender.
public protocol PushSender {
    func send(_ requests: [APNsRequest]) -> [APNsResponse]
}

extension APNsClient: PushSender {}

/// The sender of a deliveryd that has no APNs key: it records each push as one JSON line on standard
/// error and answers with status 200 and the reason `not_delivered_log_sender`, so the outbox drains,
/// and the push log shows plainly that nothing reached Apple.
public struct LogSender: PushSender {
    /// The reason every answer carries, kept in the push log.
    public static let reason = APNsReason("not_delivered_log_sender")

    private let write: (String) -> Void

    /// - Parameter write: where lines go; standard error by default.
    public init(write: @escaping (String) -> Void = LogSender.standardError) {
        self.write = write
    }

    public func send(_ requests: [APNsRequest]) -> [APNsResponse] {
        requests.map { request in
            let payload = String(decoding: request.payload, as: UTF8.self)
            let fields: [String: Any] = [
                "level": "info", "message": "push.not_delivered", "apns.topic": request.topic,
                "apns.priority": request.priority, "device.token.prefix": String(request.deviceToken.prefix(8)),
                "payload": payload,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) {
                write(String(decoding: data, as: UTF8.self))
            }
            return APNsResponse(
                status: 200, reason: Self.reason, apnsID: nil, timestamp: nil, transportError: nil, latencySeconds: 0
            )
        }
    }

    /// Writes one line to file descriptor 2.
    public static func standardError(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
