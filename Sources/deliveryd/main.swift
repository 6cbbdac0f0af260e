import Cryptography
import DeliveryAPI
import Foundation
import HTTPServer
import Projection
import Pusher
import Storage

#if canImport(Glibc)
    import Glibc
#endif

/// Writes one line to standard error without touching the global `stderr` stream.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

var arguments = Array(CommandLine.arguments.dropFirst())
var backupPath: String?
var keysAction: KeysCommand.Action?
if arguments.first == "keys" {
    guard let (action, rest) = KeysCommand.parse(Array(arguments.dropFirst())) else {
        printError(KeysCommand.usage)
        exit(2)
    }
    keysAction = action
    arguments = rest
} else if arguments.first == "backup" {
    guard arguments.count >= 2, !arguments[1].hasPrefix("--") else {
        printError("usage: deliveryd backup PATH [--data-dir DIR]")
        exit(2)
    }
    backupPath = arguments[1]
    arguments.removeFirst(2)
}
if arguments.contains("--help") || arguments.contains("-h") {
    print(Configuration.helpText, terminator: "")
    exit(0)
}

let configuration: Configuration
do {
    configuration = try Configuration.load(arguments: arguments, environment: ProcessInfo.processInfo.environment)
} catch {
    printError("deliveryd: \(error)")
    exit(2)
}

do {
    try CurlLibrary.current.requireHTTP2()
} catch {
    printError("deliveryd: \(error)")
    exit(1)
}

let storage: Database
do {
    storage = try Database.open(
        StorageConfiguration(
            dataDirectory: configuration.dataDirectory,
            synchronous: configuration.synchronous == "normal" ? .normal : .full
        )
    )
} catch {
    printError("deliveryd: cannot open the database in \(configuration.dataDirectory): \(error)")
    exit(1)
}

if let backupPath {
    do {
        try storage.backup(to: backupPath)
        print("deliveryd: backup of \(storage.path) written to \(backupPath)")
        exit(0)
    } catch {
        printError("deliveryd: backup failed: \(error)")
        exit(1)
    }
}

if let keysAction {
    exit(KeysCommand.run(keysAction, store: storage))
}

do {
    let now = Date()
    if let adminKey = configuration.adminKey {
        try storage.upsertAPIKey(Credentials.configuredAdminKey(adminKey, now: now))
    } else if try storage.activeAPIKeyCount(role: .admin) == 0 {
        let (key, record) = Credentials.newAPIKey(role: .admin, merchantID: nil, riderID: nil, now: now)
        try storage.createAPIKey(record)
        printError("deliveryd: created the first admin key (shown only now, store it): \(key)")
    }
} catch {
    printError("deliveryd: cannot set up the admin key: \(error)")
    exit(1)
}

/// Prunes what the retention policy no longer keeps, once at start and then every hour.
let pruneTimer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
pruneTimer.schedule(deadline: .now(), repeating: .seconds(3600))
pruneTimer.setEventHandler {
    do {
        let report = try storage.prune(now: Date())
        printError(
            "deliveryd: pruned activities=\(report.activities) push_log=\(report.pushLog) outbox=\(report.outbox) "
                + "idempotency_keys=\(report.idempotencyKeys)"
        )
    } catch {
        printError("deliveryd: pruning failed: \(error)")
    }
}
pruneTimer.resume()

/// Moves committed pages from the WAL into the database file every second, off the request path.
let checkpointTimer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
checkpointTimer.schedule(deadline: .now() + 1, repeating: 1)
checkpointTimer.setEventHandler {
    do {
        try storage.checkpoint()
    } catch {
        printError("deliveryd: checkpoint failed: \(error)")
    }
}
checkpointTimer.resume()

let projectionConfiguration = ProjectionConfiguration(
    dateEncoding: configuration.dateEncoding == "unix" ? .unix : .reference,
    dismissalDelay: Double(configuration.dismissalDelaySeconds)
)
let outboxSignal = OutboxSignal()
let service = DeliveryService(
    store: storage,
    configuration: DeliveryServiceConfiguration(
        projection: projectionConfiguration, defaultBundleID: configuration.apnsTopic),
    outboxSignal: outboxSignal,
    logError: { printError("deliveryd: \($0)") }
)
let server: HTTPServer
do {
    server = try HTTPServer(
        configuration: HTTPServerConfiguration(
            address: configuration.listen,
            limits: HTTPLimits(maxBodyBytes: configuration.maxBodyBytes),
            requestTimeout: Double(configuration.requestTimeoutSeconds),
            idleTimeout: Double(configuration.idleTimeoutSeconds),
            maxConnections: configuration.maxConnections
        ),
        router: service.router(),
        accessLog: configuration.accessLog ? AccessLogWriter.write : nil
    )
} catch {
    printError("deliveryd: cannot listen on \(configuration.listen): \(error)")
    exit(1)
}

signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
let stopSignals = [SIGTERM, SIGINT].map { DispatchSource.makeSignalSource(signal: $0, queue: .main) }
for source in stopSignals {
    source.setEventHandler {
        printError("deliveryd: stopping: finishing requests in flight")
        DispatchQueue.global().async {
            server.shutdown()
            printError("deliveryd: stopped")
            exit(0)
        }
    }
    source.resume()
}

for (name, value) in configuration.summary {
    printError("deliveryd: config \(name)=\(value)")
}
printError("deliveryd: database \(storage.path) (journal \(storage.journalMode))")
printError("deliveryd: libcurl \(CurlLibrary.current.version) with HTTP/2, \(CurlLibrary.current.sslVersion)")
do {
    try server.start()
} catch {
    printError("deliveryd: cannot start the HTTP server: \(error)")
    exit(1)
}
printError("deliveryd: listening on http://\(server.boundAddress)")

let signingKey: P256SigningKey?
if let keyFile = configuration.apnsKeyFile {
    do {
        signingKey = try P256SigningKey(pem: String(contentsOfFile: keyFile, encoding: .utf8))
    } catch {
        printError("deliveryd: cannot use the APNs key \(keyFile): \(error)")
        exit(1)
    }
    printError("deliveryd: pusher: APNs with key \(configuration.apnsKeyID ?? "")")
} else {
    signingKey = nil
    printError("deliveryd: pusher: log sender (no APNs key): pushes are recorded, not delivered")
}
let pusherConfiguration = PusherConfiguration(
    developmentURL: configuration.apnsDevelopmentURL, productionURL: configuration.apnsProductionURL,
    projection: projectionConfiguration
)

/// The push worker drains the outbox; a crash or stop mid-batch loses nothing (leases expire).
Task.detached {
    let sender: any PushSender
    var tokens: ProviderTokenCache?
    if let signingKey, let keyID = configuration.apnsKeyID, let teamID = configuration.apnsTeamID {
        do {
            sender = try APNsClient(caFile: configuration.apnsCAFile)
        } catch {
            printError("deliveryd: pusher cannot start: \(error)")
            exit(1)
        }
        tokens = ProviderTokenCache(key: signingKey, keyID: keyID, teamID: teamID)
    } else {
        sender = LogSender()
    }
    let worker = PushWorker(store: storage, sender: sender, tokens: tokens, configuration: pusherConfiguration)
    await worker.run(signal: outboxSignal) { error in
        printError("deliveryd: pusher batch failed: \(error)")
    }
}
dispatchMain()
