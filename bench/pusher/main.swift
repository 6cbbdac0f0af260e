import Cryptography
import Foundation
import OrderDomain
import Pusher
import Storage
import Synchronization
import Telemetry
import TestSupport

// Pushes per second through one PushWorker: outbox claim, planning from SQLite, payloads, ES256
// provider token, HTTP/2 over TLS to a sink, and the push-log and outbox bookkeeping.
// With PLATFORM=android every device is an Android phone: FCM messages, with an OAuth 2 access token
// of the service account in DATA_DIR/service-account.json (its assertion RS256-signed as in production;
// the sink checks no token, so the exchange hands back a fixed one).
// usage: pusher-bench PUSHES SINK_URL CA_FILE DATA_DIR
// Prints `pushes_per_s=N p50_ms=X p99_ms=Y connections=C batch=B workers=W` last.

let arguments = CommandLine.arguments
guard arguments.count == 5, let pushCount = Int(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: pusher-bench PUSHES SINK_URL CA_FILE DATA_DIR\n".utf8))
    exit(2)
}
let sinkURL = arguments[2]
let database = try Database.open(StorageConfiguration(dataDirectory: arguments[4]))
let now = Date()

let orders = try (0..<pushCount).map { index -> (Order, OrderEvent) in
    try OrderDraft(
        number: "P-\(index)", merchantName: "Bench Merchant", items: [.init(name: "Tea", quantity: 1, price: 2)],
        customer: .init(id: "c-\(index)", name: "Customer", phone: "+49 30 1234567", locale: "en"),
        address: "Somewhere 1", payment: .init(method: "cash", brand: nil, last4: nil),
        estimatedArrival: now.addingTimeInterval(1800), note: nil
    ).validated(id: "o-\(index)", merchantID: "m-1", by: .admin, at: now)
}
let android = ProcessInfo.processInfo.environment["PLATFORM"] == "android"
// Each registration queues the activity's first push: the backlog the workers drain.
try database.bulkInsert(orders, activitiesPerOrder: 1, now: now, platform: android ? .android : .ios)

/// The sink verifies no access token: the assertion is still signed, once, as in production.
struct SinkTokenExchange: FCMTokenExchange {
    func exchange(assertion: String, at url: String) throws(FCMAuthenticationError) -> (
        token: String, lifetime: TimeInterval
    ) { ("bench-access-token", 3600) }
}
let fcmTokens =
    android
    ? FCMAccessTokens(
        account: try GoogleServiceAccount(
            json: Array(try Data(contentsOf: URL(fileURLWithPath: arguments[4] + "/service-account.json")))),
        exchange: SinkTokenExchange()) : nil

// A throwaway ES256 key: the sink does not verify tokens, but the worker signs them as in production.
let keyPEM = try String(contentsOfFile: arguments[4] + "/bench-key.pem", encoding: .utf8)
let key = try P256SigningKey(pem: keyPEM)
let caFile = arguments[3]
let batchSize = Int(ProcessInfo.processInfo.environment["BATCH"] ?? "") ?? PusherConfiguration().batchSize
let configuration = {
    var configuration = PusherConfiguration(apnsURL: sinkURL)
    configuration.batchSize = batchSize
    return configuration
}()
let connections = Mutex(0)

// Each worker runs as deliveryd runs it (`run`, with batch writes overlapping the next send).
let started = Date()
// Workers side by side as deliveryd runs them (`--push-workers`, default 2), sharing one signal.
let workerCount = Int(ProcessInfo.processInfo.environment["WORKERS"] ?? "") ?? 2
let signal = OutboxSignal()
let pauses = EnvironmentPauses()
var pushers: [Task<Void, Never>] = []
for workerIndex in 0..<workerCount {
    pushers.append(
        Task.detached {
            do {
                let client = try APNsClient(caFile: caFile)
                let fcmClient = try FCMClient(caFile: caFile)
                let worker = PushWorker(
                    store: database, sender: client,
                    tokens: ProviderTokenCache(key: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
                    configuration: configuration, owner: "bench-\(workerIndex)",
                    metrics: PushMetrics(registry: MetricsRegistry()),
                    logger: Logger(label: "bench", minimumLevel: .error), pauses: pauses,
                    fcm: fcmTokens.map { FCMRoute(baseURL: sinkURL, sender: fcmClient, tokens: $0) }
                )
                await worker.run(signal: signal, idlePoll: .milliseconds(20)) { error in
                    FileHandle.standardError.write(Data("batch failed: \(error)\n".utf8))
                }
                connections.withLock { $0 += client.connectionsOpened + fcmClient.connectionsOpened }
            } catch {
                FileHandle.standardError.write(Data("cannot start: \(error)\n".utf8))
                exit(1)
            }
        })
}
signal.notify()
// Counting the backlog costs a scan of it: look every 50 ms (≤ 2 % of a 3 s run), not more often,
// so that the watching does not take the worker's CPU.
while try database.outboxDepth().count > 0 {
    try await Task.sleep(for: .milliseconds(50))
}
let seconds = Date().timeIntervalSince(started)
for pusher in pushers { pusher.cancel() }
for pusher in pushers { await pusher.value }

var latencies: [Int] = []
var accepted = 0
for index in 0..<pushCount {
    for attempt in try database.pushLog(orderID: "o-\(index)") {
        if attempt.httpStatus == 200 { accepted += 1 }
        latencies.append(attempt.latencyMilliseconds ?? 0)
    }
}
latencies.sort()
guard accepted == pushCount, !latencies.isEmpty else {
    FileHandle.standardError.write(Data("only \(accepted) of \(pushCount) pushes were accepted\n".utf8))
    exit(1)
}
let depth = try database.outboxDepth().count
let connectionsUsed = connections.withLock { $0 }
print("pushed \(pushCount) in \(String(format: "%.2f", seconds)) s; outbox left \(depth)")
print(
    "platform=\(android ? "android" : "ios") pushes_per_s=\(Int(Double(pushCount) / seconds)) p50_ms=\(latencies[latencies.count / 2]) "
        + "p99_ms=\(latencies[latencies.count * 99 / 100]) connections=\(connectionsUsed) "
        + "batch=\(configuration.batchSize) workers=\(workerCount)"
)
