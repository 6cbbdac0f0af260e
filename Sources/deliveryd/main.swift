import Cryptography
import DeliveryAPI
import Foundation
import HTTPServer
import Lifecycle
import PostgresStorage
import Projection
import Pusher
import Storage
import Synchronization
import Telemetry
import Webhooks

#if canImport(Glibc)
    import Glibc
#endif

/// Writes one line to standard error without touching the global `stderr` stream.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

// Everything this process creates (the database, its WAL, backups, the sealing key, the lock) is
// its owner's alone: the files hold customers' contact details.
umask(0o077)

var arguments = Array(CommandLine.arguments.dropFirst())
var backupPath: String?
var migratingToPostgres = false
var keysAction: KeysCommand.Action?
if arguments.first == "keys" {
    guard let (action, rest) = KeysCommand.parse(Array(arguments.dropFirst())) else {
        printError(KeysCommand.usage)
        exit(2)
    }
    keysAction = action
    arguments = rest
} else if arguments.first == "migrate-to-postgres" {
    migratingToPostgres = true
    arguments.removeFirst()
} else if arguments.first == "backup" {
    guard arguments.count >= 2, !arguments[1].hasPrefix("--") else {
        printError("usage: deliveryd backup PATH [--data-dir DIR]")
        exit(2)
    }
    backupPath = arguments[1]
    arguments.removeFirst(2)
}
if arguments.first == "env-file" {
    var values: [String: String] = [:]
    for assignment in arguments.dropFirst() {
        let parts = assignment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            printError("usage: deliveryd env-file [VARIABLE=value ...]")
            exit(2)
        }
        values[String(parts[0])] = String(parts[1])
    }
    do {
        print(try Configuration.environmentFile(values: values), terminator: "")
        exit(0)
    } catch {
        printError("deliveryd: env-file: \(error)")
        exit(2)
    }
}
if arguments == ["--version"] {
    print("deliveryd \(BuildInfo.current.description)")
    exit(0)
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

if migratingToPostgres {
    guard let databaseURL = configuration.databaseURL else {
        printError("usage: deliveryd migrate-to-postgres [--data-dir DIR] --database-url URL")
        exit(2)
    }
    do {
        let copied = try SQLiteToPostgres.copy(dataDirectory: configuration.dataDirectory, to: databaseURL)
        for (table, rows) in copied { print("\(table)\t\(rows)") }
        print("deliveryd: copied \(configuration.dataDirectory) to PostgreSQL; start the nodes with --database-url")
        exit(0)
    } catch {
        printError("deliveryd: migrate-to-postgres: \(error)")
        exit(1)
    }
}

if backupPath != nil, configuration.databaseURL != nil {
    printError(
        "deliveryd: backup copies the SQLite database; back PostgreSQL up with its own tools (pg_dump, pg_basebackup)")
    exit(2)
}

/// The store: SQLite in the data directory, or PostgreSQL when a database URL is configured.
let storage: any DeliveryStore
/// The SQLite database when it is the store: backups, checkpoints and commit statistics are its own.
let sqlite: Database?
/// The PostgreSQL store when it is the store: its pool's health goes to the metrics.
let postgres: PostgresStore?
if let databaseURL = configuration.databaseURL {
    do {
        let store = try PostgresStore.open(url: databaseURL, poolSize: configuration.databasePoolSize)
        (storage, sqlite, postgres) = (store, nil, store)
    } catch {
        printError("deliveryd: cannot open the PostgreSQL database: \(error)")
        exit(1)
    }
} else {
    do {
        let database = try Database.open(configuration.storage)
        (storage, sqlite, postgres) = (database, database, nil)
    } catch {
        printError("deliveryd: cannot open the database in \(configuration.dataDirectory): \(error)")
        exit(1)
    }
}

if let backupPath, let sqlite {
    do {
        try sqlite.backup(to: backupPath)
        print("deliveryd: backup of \(sqlite.path) written to \(backupPath)")
        exit(0)
    } catch {
        printError("deliveryd: backup failed: \(error)")
        exit(1)
    }
}

if let keysAction {
    exit(KeysCommand.run(keysAction, store: storage))
}

/// Held until the process ends: a second service on this data directory fails here, naming this one.
let dataDirectoryLock: DataDirectoryLock
do {
    // SQLite made it already; on PostgreSQL it holds only the lock and the sealing key.
    try FileManager.default.createDirectory(
        atPath: configuration.dataDirectory, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    dataDirectoryLock = try DataDirectoryLock(dataDirectory: configuration.dataDirectory)
} catch {
    printError("deliveryd: \(error)")
    exit(1)
}

let sealingKey: SealingKey
do {
    sealingKey = try SealingKeyFile.loadOrCreate(
        at: configuration.sealingKeyFile
            ?? (configuration.dataDirectory as NSString).appendingPathComponent("sealing.key"))
} catch {
    printError("deliveryd: \(error)")
    exit(1)
}

/// The service's log: JSON lines on standard error. Secrets (keys, tokens) never go into a field.
let logger = Logger(label: "deliveryd", minimumLevel: configuration.logLevel)
let registry = MetricsRegistry()
ProcessMetrics.register(in: registry, build: .current)

do {
    let now = Date()
    if let adminKey = configuration.adminKey {
        let record = Credentials.configuredAdminKey(adminKey, now: now)
        do {
            try storage.upsertAPIKey(record)
        } catch {
            // Nodes starting together on one PostgreSQL upsert the same key at once, and PostgreSQL
            // may refuse the second on the key's hash (its ON CONFLICT arbitrates the id only). Once
            // the first committed, the same upsert takes the update path.
            try storage.upsertAPIKey(record)
        }
        if try storage.apiKey(id: record.id)?.revokedAt != nil {
            logger.warning(
                "admin_key.configured_revoked",
                ["key.id": .string(record.id), "note": "this --admin-key was revoked and stays so; set a new value"])
        }
    } else if try storage.activeAPIKeyCount(role: .admin) == 0 {
        let (key, record) = Credentials.newAPIKey(role: .admin, merchantID: nil, riderID: nil, now: now)
        try storage.createAPIKey(record)
        // The one place a key is shown: on standard output, for the operator, never in the log.
        FileHandle.standardOutput.write(
            Data("deliveryd: created the first admin key (shown only now, store it): \(key)\n".utf8))
        logger.info("admin_key.created", ["key.id": .string(record.id)])
    }
} catch {
    logger.error("admin_key.setup_failed", ["error": .string("\(error)")])
    exit(1)
}

/// Prunes what the retention policy no longer keeps (a maintenance job, once at start and then every hour).
@Sendable func pruneExpiredData() {
    do {
        // With several nodes on one database, the one that holds the task prunes; the others skip.
        let pruned = try storage.exclusively("retention") {
            try storage.prune(
                now: Date(),
                policy: RetentionPolicy(personalData: Double(configuration.personalDataRetentionDays) * 86_400))
        }
        guard let report = pruned else {
            logger.info("storage.prune_skipped", ["note": "another node is pruning"])
            return
        }
        logger.info(
            "storage.pruned",
            [
                "pruned.activities": .int(report.activities), "pruned.push_log": .int(report.pushLog),
                "pruned.outbox": .int(report.outbox), "pruned.idempotency_keys": .int(report.idempotencyKeys),
                "erased.orders": .int(report.erasedOrders), "pruned.webhook_events": .int(report.webhookEvents),
                "pruned.webhook_attempts": .int(report.webhookAttempts),
            ])
    } catch {
        logger.error("storage.prune_failed", ["error": .string("\(error)")])
    }
}

/// Whether the last checkpoint failed: a full disk would otherwise log an error every second.
let checkpointFailing = Atomic<Bool>(false)
/// Moves committed pages from the WAL into the database file (a maintenance job, every second, off
/// the request path; SQLite only: PostgreSQL checkpoints by itself).
@Sendable func checkpoint(_ sqlite: Database) {
    do {
        try sqlite.checkpoint()
        if checkpointFailing.exchange(false, ordering: .relaxed) { logger.info("storage.checkpoint_recovered") }
    } catch {
        if !checkpointFailing.exchange(true, ordering: .relaxed) {
            logger.error("storage.checkpoint_failed", ["error": .string("\(error)")])
        }
    }
}

let outboxSignal = OutboxSignal()
/// On PostgreSQL, pushes queued by any node wake this node's pushers at once.
let outboxListener = configuration.databaseURL.map { url in
    PostgresOutboxListener(url: url) { outboxSignal.notify() }
}
let environmentPauses = EnvironmentPauses()
/// The FCM service account's access tokens, when Android devices are served: shared by the workers,
/// so that one token is fetched an hour, not one per worker.
let fcmTokens: FCMAccessTokens?
do {
    fcmTokens = try configuration.fcmServiceAccountFile.map { path in
        let account = try GoogleServiceAccount(
            json: Array(try Data(contentsOf: URL(fileURLWithPath: path))), tokenURL: configuration.fcmTokenURL)
        return FCMAccessTokens(account: account, exchange: CurlTokenExchange(caFile: configuration.fcmCAFile))
    }
} catch {
    logger.error(
        "fcm.service_account_unusable",
        ["file.path": .string(configuration.fcmServiceAccountFile ?? ""), "error": .string("\(error)")])
    exit(1)
}
let fcmProjectPauses = FCMProjectPauses()
if let account = fcmTokens?.account {
    logger.info(
        "fcm.enabled",
        [
            "fcm.project": .string(account.projectID), "fcm.client_email": .string(account.clientEmail),
            "url.full": .string(configuration.fcmURL),
        ])
}
/// The PostgreSQL pool's state, for `/readyz` and the metrics.
let databaseHealth = postgres.map { store in { @Sendable in store.health } }
let service = DeliveryService(
    store: storage,
    configuration: configuration.deliveryService(
        databaseHealth: databaseHealth, androidProject: fcmTokens?.account.projectID),
    sealingKey: sealingKey, outboxSignal: outboxSignal, registry: registry,
    logger: Logger(label: "api", minimumLevel: configuration.logLevel),
    sendingStatus: { now in
        let android = fcmTokens.map { tokens in
            let project = tokens.account.projectID
            let pause = fcmProjectPauses.paused(now: now).first { $0.project == project }
            return PushSendingStatus.Android(project: project, pausedUntil: pause?.until, reason: pause?.reason)
        }
        guard configuration.usesAPNs else {
            return PushSendingStatus(sender: .log, apps: [], environments: [], android: android)
        }
        return PushSendingStatus(
            sender: .apns, apps: configuration.apnsBundleIDs,
            environments: environmentPauses.statuses(now: now).map {
                PushSendingStatus.Environment(
                    environment: $0.environment, pausedUntil: $0.pausedUntil, reason: $0.reason,
                    confirmed: $0.confirmed)
            }, android: android)
    }
)

/// Webhooks go out on a thread and connections of their own: a slow receiver never delays a push.
let webhooks = WebhookDispatcher(
    store: storage, sealingKey: sealingKey,
    configuration: configuration.webhookDispatcher,
    owner: "webhooks-\(getpid())-\(UUID().uuidString.prefix(8))", registry: registry,
    logger: Logger(label: "webhooks", minimumLevel: configuration.logLevel))

/// Looks for push-to-starts whose activity never registered (see `sweepStalledStarts`): twice a
/// minute, or twice per `--start-registration-timeout` when that is shorter, so that a stall is told
/// (log, metrics, the merchant's webhook) at most half a timeout after it is one.
let stalledStartSweep = min(30, max(1, Double(configuration.startRegistrationTimeoutSeconds) / 2))
var maintenanceJobs = [
    PeriodicJob("prune", every: 3_600, firstRunAfter: 0, work: pruneExpiredData),
    PeriodicJob("stalled-starts", every: stalledStartSweep, firstRunAfter: stalledStartSweep) {
        service.sweepStalledStarts()
    },
    // The dashboard's history: its curves survive a reload and are the same for every operator.
    PeriodicJob("history", every: configuration.historyIntervalSeconds, firstRunAfter: 0) {
        service.recordHistorySample()
    },
    // The rides whose positions are due, four times a second: the delay a ride's push may add to its
    // interval, and the batch its stores commit in.
    PeriodicJob("rides", every: 0.25, firstRunAfter: 0.25) { service.storeDueRides() },
    // The dashboard's answer, rebuilt while someone looks at it: requests find a fresh one.
    PeriodicJob("stats", every: 1, firstRunAfter: 1) { service.refreshStatsSnapshots() },
    // A key revoked through another node or `deliveryd keys revoke` leaves this node's key cache.
    PeriodicJob("key-changes", every: 0.5, firstRunAfter: 0.5) { service.checkKeyChanges() },
]
if let sqlite {
    maintenanceJobs.append(PeriodicJob("checkpoint", every: 1, firstRunAfter: 1) { checkpoint(sqlite) })
}
/// The maintenance jobs; the last thing they do is store the newest state of every ride, so that a
/// restart goes on from where the riders were.
let maintenance = PeriodicJobs(name: "maintenance", maintenanceJobs) { service.storeDueRides(all: true) }

// Access-log lines are `info`: a quieter log level leaves them out, as it does every info line.
let accessLog = configuration.accessLog && configuration.logLevel <= .info ? AccessLog.configuration : nil
let server: HTTPServer
do {
    server = try HTTPServer(
        configuration: configuration.httpServer,
        router: service.router(),
        accessLog: accessLog
    )
} catch {
    logger.error(
        "http.listen_failed",
        ["server.address": .string(configuration.listen.description), "error": .string("\(error)")])
    printError("deliveryd: cannot listen on \(configuration.listen): \(error)")
    exit(1)
}
if server.connectionStatistics.limit < configuration.maxConnections {
    logger.warning(
        "http.connection_limit_lowered",
        [
            "config.max_connections": .int(configuration.maxConnections),
            "http.connection_limit": .int(server.connectionStatistics.limit),
            "note": "the open-file limit allows no more; raise it (ulimit -n, LimitNOFILE) for more connections",
        ])
}
HTTPMetrics.register(
    in: registry, statistics: { server.requestStatistics() }, connections: { server.connectionStatistics })
if let sqlite { StorageMetrics.register(in: registry, statistics: sqlite.commitStatistics) }
if let databaseHealth { StorageMetrics.register(in: registry, pool: databaseHealth) }

var settings: [String: Logger.Value] = [
    "service.version": .string(BuildInfo.current.version), "service.commit": .string(BuildInfo.current.commit),
]
for (name, value) in configuration.summary { settings["config." + name] = .string(value) }
logger.info("service.configuration", settings)
if let sqlite {
    logger.info("storage.opened", ["db.path": .string(sqlite.path), "db.journal_mode": .string(sqlite.journalMode)])
} else if let postgres {
    logger.info(
        "storage.opened",
        [
            "db.engine": "postgresql", "db.pool_size": .int(configuration.databasePoolSize),
            "db.schema_version": .int((try? postgres.schemaVersions().last) ?? 0),
        ])
}
logger.info(
    "apns.transport",
    ["curl.version": .string(CurlLibrary.current.version), "tls.library": .string(CurlLibrary.current.sslVersion)])

let signingKey: P256SigningKey?
let appKeys: [(bundleID: String, key: P256SigningKey, keyID: String, teamID: String)]
do {
    signingKey = try configuration.apnsKeyFile.map {
        try P256SigningKey(pem: String(contentsOfFile: $0, encoding: .utf8))
    }
    appKeys = try configuration.apnsApps.map { app in
        (
            app.bundleID, try P256SigningKey(pem: String(contentsOfFile: app.keyFile, encoding: .utf8)), app.keyID,
            app.teamID
        )
    }
} catch {
    logger.error("apns.key_unusable", ["error": .string("\(error)")])
    exit(1)
}
if configuration.usesAPNs {
    logger.info(
        "pusher.started",
        [
            "pusher.sender": "apns", "apns.key_id": .string(configuration.apnsKeyID ?? ""),
            "apns.apps": .string(appKeys.map(\.bundleID).joined(separator: ",")),
        ])
} else {
    logger.info(
        "pusher.started",
        ["pusher.sender": "log", "note": "no APNs key: pushes are recorded in the push log, not delivered"])
}
let pusherConfiguration = configuration.pusher
let pushMetrics = PushMetrics(registry: registry)

/// Provider tokens per key, shared by the workers: each is minted once per refresh window.
let tokens: ProviderTokenCache? = {
    guard let signingKey, let keyID = configuration.apnsKeyID, let teamID = configuration.apnsTeamID else { return nil }
    return ProviderTokenCache(key: signingKey, keyID: keyID, teamID: teamID)
}()
let appTokens = Dictionary(
    uniqueKeysWithValues: appKeys.map {
        ($0.bundleID, ProviderTokenCache(key: $0.key, keyID: $0.keyID, teamID: $0.teamID))
    })

/// The push workers drain the outbox side by side, each with its own connections and leases (the
/// claim never gives two workers rows of one activity); a crash or stop mid-batch loses nothing.
let pusher = PushService(workers: configuration.pushWorkers, signal: outboxSignal, logger: logger) { index in
    let sender: any PushSender = configuration.usesAPNs ? try APNsClient(caFile: configuration.apnsCAFile) : LogSender()
    let fcm = try fcmTokens.map { tokens in
        FCMRoute(baseURL: configuration.fcmURL, sender: try FCMClient(caFile: configuration.fcmCAFile), tokens: tokens)
    }
    return PushWorker(
        store: storage, sender: sender, tokens: tokens, appTokens: appTokens, configuration: pusherConfiguration,
        owner: "pusher-\(getpid())-\(index)", metrics: pushMetrics,
        logger: Logger(label: "pusher", minimumLevel: configuration.logLevel), pauses: environmentPauses, fcm: fcm,
        projectPauses: fcmProjectPauses)
}

/// The process: the services start in this order and stop in the reverse one. The HTTP server stops
/// first (no new connections, the requests in flight answered), then the maintenance jobs (the rides
/// stored), the webhooks (attempts in flight finished), the pushers (each finishes its batch and
/// writes its outcomes; what is still queued is sent by the next start), and the log writer last.
let services = ServiceGroup(
    [
        .init(LogWriterService(), stopTimeout: .seconds(3)),
        .init(pusher, stopTimeout: .seconds(15)),
        .init(webhooks, stopTimeout: .seconds(WebhookDispatcher.stopGrace + 5)),
        .init(maintenance, stopTimeout: .seconds(30)),
        .init(server, stopTimeout: .seconds(configuration.requestTimeoutSeconds + 10)),
    ],
    logger: logger)
/// Under systemd (`Type=notify`): ready once every service runs, stopping when a stop begins.
let systemd = SystemdNotifier.fromEnvironment()
@Sendable func tellSystemd(_ state: String) {
    do { try systemd.notify(state) } catch { logger.warning("systemd.notify_failed", ["error": .string("\(error)")]) }
}
let stopSignals = StopSignals { signal in
    tellSystemd("STOPPING=1")
    services.shutdown(reason: signal)
}
logger.info("http.listening", ["url.full": .string("http://\(server.boundAddress)")])
let outcome = await services.run {
    tellSystemd("READY=1\nSTATUS=serving on \(server.boundAddress)")
}
logger.info(
    "process.stopped",
    [
        "process.clean": .string(outcome.isClean ? "true" : "false"),
        "process.failed_services": .string(outcome.failed.joined(separator: ",")),
        "process.late_services": .string(outcome.timedOut.joined(separator: ",")),
    ])
LogOutput.standardError.flush()
exit(outcome.failed.isEmpty ? 0 : 1)
