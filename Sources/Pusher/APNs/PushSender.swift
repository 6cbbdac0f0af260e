internal import Foundation
internal import JSONSyntax
internal import Telemetry

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

    private enum Destination {
        case output(LogOutput)
        case lines((String) -> Void)
    }

    private let destination: Destination

    /// Lines to standard error through the process's log writer: one hand-over per batch, never a
    /// write on the pusher's thread.
    public init() {
        destination = .output(.standardError)
    }

    /// Each line to `write`, without its newline.
    public init(write: @escaping (String) -> Void) {
        destination = .lines(write)
    }

    public func send(_ requests: [APNsRequest]) -> [APNsResponse] {
        var batch: [UInt8] = []
        batch.reserveCapacity(requests.count * 512)
        var line: [UInt8] = []
        for request in requests {
            line.removeAll(keepingCapacity: true)
            Self.appendLine(for: request, to: &line)
            switch destination {
            case .output: batch += line
            case .lines(let write): write(String(decoding: line.dropLast(), as: UTF8.self))
            }
        }
        if case .output(let output) = destination, !batch.isEmpty { output.submit(batch, lines: requests.count) }
        let answer = APNsResponse(
            status: 200, reason: Self.reason, apnsID: nil, timestamp: nil, transportError: nil, latencySeconds: 0)
        return Array(repeating: answer, count: requests.count)
    }

    /// One JSON line, keys in sorted order, ending in a newline. The device token is cut to its
    /// first 8 characters: enough to find it, not enough to push to it.
    static func appendLine(for request: APNsRequest, to line: inout [UInt8]) {
        line += Array(#"{"apns.priority":"#.utf8)
        line += Array(String(request.priority).utf8)
        JSONText.appendField("apns.topic", request.topic, to: &line)
        JSONText.appendField("device.token.prefix", request.deviceToken.prefix(8), to: &line)
        line += Array(#","level":"info","message":"push.not_delivered""#.utf8)
        JSONText.appendField("payload", String(decoding: request.payload, as: UTF8.self), to: &line)
        line += [UInt8(ascii: "}"), UInt8(ascii: "\n")]
    }
}
