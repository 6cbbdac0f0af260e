import Foundation
import HTTPServer
import Telemetry

/// Every setting of `deliveryd`, read from flags first, then environment variables, then defaults.
///
/// Only this executable reads the environment; the modules get typed configuration values.
struct Configuration: Sendable {
    var listen = ListenAddress.loopback(port: 8080)
    var dataDirectory = "./var"
    /// `nil`: SQLite in the data directory; a libpq URL: PostgreSQL, shared by every node.
    var databaseURL: String?
    var databasePoolSize = 8
    var adminKey: String?
    /// `nil`: `sealing.key` in the data directory.
    var sealingKeyFile: String?
    var apnsKeyFile: String?
    var apnsKeyID: String?
    var apnsTeamID: String?
    var apnsTopic: String?
    var apnsDevelopmentURL = "https://api.sandbox.push.apple.com"
    var apnsProductionURL = "https://api.push.apple.com"
    var apnsCAFile: String?
    /// The Google service-account key file of the Firebase project Android devices belong to; `nil`: no FCM.
    var fcmServiceAccountFile: String?
    var fcmURL = "https://fcm.googleapis.com"
    /// `nil`: the key file's `token_uri` (Google's OAuth 2 endpoint).
    var fcmTokenURL: String?
    var fcmCAFile: String?
    var dismissalDelaySeconds = 900
    var staleGraceSeconds = 900
    var minimumFreshnessSeconds = 900
    var highPriorityBudget = 6
    var startLeadTimeSeconds = 3600
    var startRegistrationTimeoutSeconds = 120
    var ridePushIntervalSeconds = 30
    var trackingTokenLifetimeSeconds = 7 * 86_400
    var authFailuresPerAddress = 20
    var authFailuresPerKey = 10
    var requestsPerKey = 100
    var requestsPerApp = 5
    var activitiesPerOrder = 10
    var devicesPerCustomer = 10
    var synchronous = "full"
    var accessLog = true
    var logLevel = Logger.Level.info
    var maxBodyBytes = 1024 * 1024
    var maxConnections = 20_000
    var maxConnectionsPerAddress = 256
    var personalDataRetentionDays = 30
    var trustedProxies = TrustedProxies()
    var eventLoops = 2
    var handlerThreads = 8
    var requestTimeoutSeconds = 10
    var idleTimeoutSeconds = 60
    var pushLeaseSeconds = 30
    var pushWorkers = 2
    var historyIntervalSeconds = 10.0
    /// `https`, `http` (also plain http), or `local` (also plain http and private, loopback and
    /// link-local addresses: tests and single machines).
    var webhookURLs = "https"
    var webhookTimeoutSeconds = 10
    /// Delays between attempts, in seconds; `nil`: `WebhookRetrySchedule.standard`.
    var webhookRetrySchedule: [Double]?
    var webhookDisableAfterHours = 120
    var webhookCAFile: String?
    /// `nil`: the host's name.
    var nodeName: String?
    /// Further apps with keys of their own: bundle id → key file, key id, team id.
    var apnsApps: [AppKey] = []

    /// The APNs key of one more app (a white-label build).
    struct AppKey: Sendable, Equatable {
        let bundleID: String
        let keyFile: String
        let keyID: String
        let teamID: String
    }

    /// One setting: its flag, its environment variable, its help line, and how to apply a value.
    struct Setting: Sendable {
        let flag: String
        let environment: String
        let placeholder: String
        let help: String
        let isSecret: Bool
        let apply: @Sendable (inout Configuration, String) throws(ConfigurationError) -> Void
        let current: @Sendable (Configuration) -> String?
    }

    static let settings: [Setting] = [
        Setting(
            flag: "--listen", environment: "DELIVERYD_LISTEN", placeholder: "HOST:PORT",
            help: "address to serve HTTP on (default 127.0.0.1:8080)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard let address = ListenAddress(parsing: value) else {
                    throw .invalid("--listen", value, "expected an IPv4 HOST:PORT such as 127.0.0.1:8080")
                }
                config.listen = address
            }, current: { $0.listen.description }
        ),
        Setting(
            flag: "--data-dir", environment: "DELIVERYD_DATA_DIR", placeholder: "DIR",
            help: "directory of the SQLite database (default ./var, created if missing)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard !value.isEmpty else { throw .invalid("--data-dir", value, "must not be empty") }
                config.dataDirectory = value
            }, current: { $0.dataDirectory }
        ),
        Setting(
            flag: "--database-url", environment: "DELIVERYD_DATABASE_URL", placeholder: "URL",
            help:
                "PostgreSQL instead of SQLite: a libpq URL (postgresql://user@host:5432/db; several hosts and "
                + "target_session_attrs=read-write for failover; the password is best left to PGPASSWORD or ~/.pgpass)",
            isSecret: true,
            apply: { config, value throws(ConfigurationError) in
                guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
                    throw .invalid("--database-url", "(hidden)", "expected a postgresql:// URL")
                }
                config.databaseURL = value
            }, current: { $0.databaseURL }
        ),
        integerSetting(
            flag: "--database-pool-size", environment: "DELIVERYD_DATABASE_POOL_SIZE", range: 1...200,
            help: "with --database-url: PostgreSQL connections this node holds at most (default 8)",
            keyPath: \.databasePoolSize
        ),
        Setting(
            flag: "--admin-key", environment: "DELIVERYD_ADMIN_KEY", placeholder: "KEY",
            help: "make sure an admin API key with this value exists (default: create one on first start)",
            isSecret: true,
            apply: { config, value throws(ConfigurationError) in
                config.adminKey = try adminKey(value, flag: "--admin-key")
            }, current: { $0.adminKey }
        ),
        Setting(
            flag: "--admin-key-file", environment: "DELIVERYD_ADMIN_KEY_FILE", placeholder: "PATH",
            help:
                "like --admin-key, read from this file (its first line): the way that keeps the key out of `ps` and /proc/PID/cmdline",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard let data = FileManager.default.contents(atPath: value) else {
                    throw .invalid("--admin-key-file", value, "cannot be read")
                }
                let firstLine = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first ?? ""
                config.adminKey = try adminKey(
                    firstLine.trimmingCharacters(in: .whitespaces), flag: "--admin-key-file")
            }, current: { _ in nil }
        ),
        Setting(
            flag: "--sealing-key-file", environment: "DELIVERYD_SEALING_KEY_FILE", placeholder: "PATH",
            help: "key sealing kept idempotent replies, outside the database (default DIR/sealing.key, created)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard !value.isEmpty else { throw .invalid("--sealing-key-file", value, "must not be empty") }
                config.sealingKeyFile = value
            }, current: { $0.sealingKeyFile }
        ),
        Setting(
            flag: "--apns-key-file", environment: "APNS_KEY_FILE", placeholder: "PATH",
            help: "APNs .p8 signing key (default: none, pushes go to the log sender)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in config.apnsKeyFile = value },
            current: { $0.apnsKeyFile }
        ),
        Setting(
            flag: "--apns-key-id", environment: "APNS_KEY_ID", placeholder: "ID",
            help: "the 10-character key id of the APNs key", isSecret: false,
            apply: { config, value throws(ConfigurationError) in config.apnsKeyID = value }, current: { $0.apnsKeyID }
        ),
        Setting(
            flag: "--apns-team-id", environment: "APNS_TEAM_ID", placeholder: "ID",
            help: "the 10-character Apple developer team id", isSecret: false,
            apply: { config, value throws(ConfigurationError) in config.apnsTeamID = value }, current: { $0.apnsTeamID }
        ),
        Setting(
            flag: "--apns-topic", environment: "APNS_TOPIC", placeholder: "BUNDLE_ID",
            help: "bundle id of the default iOS app", isSecret: false,
            apply: { config, value throws(ConfigurationError) in config.apnsTopic = value }, current: { $0.apnsTopic }
        ),
        Setting(
            flag: "--apns-apps", environment: "APNS_APPS", placeholder: "BUNDLE=KEY_FILE:KEY_ID:TEAM_ID,…",
            help: "further apps (white-label builds), each with its own key; activities name their app",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                var apps: [AppKey] = []
                for entry in value.split(separator: ",") {
                    let sides = entry.split(separator: "=", maxSplits: 1).map(String.init)
                    let parts = sides.count == 2 ? sides[1].split(separator: ":").map(String.init) : []
                    guard sides.count == 2, !sides[0].isEmpty, parts.count == 3, !parts.contains(where: \.isEmpty)
                    else {
                        throw .invalid(
                            "--apns-apps", value, "expected BUNDLE_ID=KEY_FILE:KEY_ID:TEAM_ID, comma-separated")
                    }
                    apps.append(AppKey(bundleID: sides[0], keyFile: parts[0], keyID: parts[1], teamID: parts[2]))
                }
                config.apnsApps = apps
            },
            current: {
                $0.apnsApps.isEmpty
                    ? nil : $0.apnsApps.map { "\($0.bundleID) (key \($0.keyID))" }.joined(separator: ", ")
            }
        ),
        httpsURLSetting(
            flag: "--apns-development-url", environment: "APNS_DEVELOPMENT_URL",
            help: "APNs host for development tokens (default https://api.sandbox.push.apple.com)",
            keyPath: \.apnsDevelopmentURL),
        httpsURLSetting(
            flag: "--apns-production-url", environment: "APNS_PRODUCTION_URL",
            help: "APNs host for production tokens (default https://api.push.apple.com)", keyPath: \.apnsProductionURL),
        pathSetting(
            flag: "--apns-ca-file", environment: "APNS_CA_FILE",
            help: "CA bundle to trust for APNs (default: the system's trust store)", keyPath: \.apnsCAFile),
        pathSetting(
            flag: "--fcm-service-account-file", environment: "FCM_SERVICE_ACCOUNT_FILE",
            help:
                "Google service-account key (JSON) of the Firebase project of the Android app; without it Android devices are refused",
            keyPath: \.fcmServiceAccountFile),
        httpsURLSetting(
            flag: "--fcm-url", environment: "FCM_URL", help: "FCM HTTP v1 API (default https://fcm.googleapis.com)",
            keyPath: \.fcmURL),
        Setting(
            flag: "--fcm-token-url", environment: "FCM_TOKEN_URL", placeholder: "URL",
            help: "OAuth 2 token endpoint for the service account (default: the key file's token_uri)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                config.fcmTokenURL = try httpsURL(value, flag: "--fcm-token-url")
            }, current: { $0.fcmTokenURL }
        ),
        pathSetting(
            flag: "--fcm-ca-file", environment: "FCM_CA_FILE",
            help: "CA bundle to trust for FCM and its token endpoint (default: the system's trust store)",
            keyPath: \.fcmCAFile),
        Setting(
            flag: "--dismissal-delay", environment: "DELIVERYD_DISMISSAL_DELAY", placeholder: "SECONDS",
            help: "how long an ended Live Activity stays on the Lock Screen, 0-14400 (default 900)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard let seconds = Int(value), (0...14_400).contains(seconds) else {
                    throw .invalid(
                        "--dismissal-delay", value, "expected whole seconds from 0 to 14400 (iOS caps it at 4 hours)")
                }
                config.dismissalDelaySeconds = seconds
            }, current: { String($0.dismissalDelaySeconds) }
        ),
        Setting(
            flag: "--date-encoding", environment: "DELIVERYD_DATE_ENCODING", placeholder: "reference",
            help: "dates in content-state: seconds since 2001-01-01, what ActivityKit decodes (the only value)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard value == "reference" else {
                    throw .invalid(
                        "--date-encoding", value,
                        "only reference is supported: ActivityKit decodes content-state with a default JSONDecoder, "
                            + "which reads a Date as seconds since 2001-01-01, so Unix seconds showed ETAs 31 years late"
                    )
                }
            }, current: { _ in nil }
        ),
        integerSetting(
            flag: "--stale-grace", environment: "DELIVERYD_STALE_GRACE", range: 0...28_800,
            help: "seconds after the ETA that an activity turns stale on the phone (default 900)",
            keyPath: \.staleGraceSeconds
        ),
        integerSetting(
            flag: "--minimum-freshness", environment: "DELIVERYD_MINIMUM_FRESHNESS", range: 60...28_800,
            help: "least seconds from now for stale-date and apns-expiration, so late orders stay fresh (default 900)",
            keyPath: \.minimumFreshnessSeconds
        ),
        integerSetting(
            flag: "--tracking-token-lifetime", environment: "DELIVERYD_TRACKING_TOKEN_LIFETIME",
            range: 3600...31_536_000,
            help: "seconds a tracking token still opens its order after delivery or cancellation (default 604800)",
            keyPath: \.trackingTokenLifetimeSeconds
        ),
        integerSetting(
            flag: "--auth-failures-per-address", environment: "DELIVERYD_AUTH_FAILURES_PER_ADDRESS", range: 1...100_000,
            help: "failed authentications per client address and minute; then 429 rate_limited (default 20)",
            keyPath: \.authFailuresPerAddress
        ),
        integerSetting(
            flag: "--auth-failures-per-key", environment: "DELIVERYD_AUTH_FAILURES_PER_KEY", range: 1...100_000,
            help: "failed authentications naming one key id, per minute; the right key always gets in (default 10)",
            keyPath: \.authFailuresPerKey
        ),
        integerSetting(
            flag: "--requests-per-key", environment: "DELIVERYD_REQUESTS_PER_KEY", range: 1...1_000_000,
            help: "requests per second with one merchant or admin API key; bursts of twice (default 100)",
            keyPath: \.requestsPerKey
        ),
        integerSetting(
            flag: "--requests-per-app", environment: "DELIVERYD_REQUESTS_PER_APP", range: 1...1_000_000,
            help:
                "requests per second with one rider key, customer credential or tracking token; bursts of four times (default 5)",
            keyPath: \.requestsPerApp
        ),
        integerSetting(
            flag: "--activities-per-order", environment: "DELIVERYD_ACTIVITIES_PER_ORDER", range: 1...1000,
            help: "live activities an order may have (default 10)", keyPath: \.activitiesPerOrder
        ),
        integerSetting(
            flag: "--devices-per-customer", environment: "DELIVERYD_DEVICES_PER_CUSTOMER", range: 1...1000,
            help: "push-to-start devices one merchant's customer may register (default 10)",
            keyPath: \.devicesPerCustomer
        ),
        integerSetting(
            flag: "--start-lead-time", environment: "DELIVERYD_START_LEAD_TIME", range: 0...28_800,
            help:
                "seconds before a placed order is due that its Live Activity starts: a pre-order's push-to-start waits until then, or until it is being prepared (default 3600)",
            keyPath: \.startLeadTimeSeconds
        ),
        integerSetting(
            flag: "--start-registration-timeout", environment: "DELIVERYD_START_REGISTRATION_TIMEOUT",
            range: 10...86_400,
            help:
                "seconds after APNs accepted a push-to-start by which its activity must register an update token, else the start counts as stalled (default 120)",
            keyPath: \.startRegistrationTimeoutSeconds
        ),
        integerSetting(
            flag: "--high-priority-budget", environment: "DELIVERYD_HIGH_PRIORITY_BUDGET", range: 0...1000,
            help: "priority-10 pushes per activity per hour before updates go at priority 5 (default 6)",
            keyPath: \.highPriorityBudget
        ),
        integerSetting(
            flag: "--ride-push-interval", environment: "DELIVERYD_RIDE_PUSH_INTERVAL", range: 1...3600,
            help: "least seconds between two pushes a rider's positions cause to one order (default 30)",
            keyPath: \.ridePushIntervalSeconds
        ),
        Setting(
            flag: "--synchronous", environment: "DELIVERYD_SYNCHRONOUS", placeholder: "full|normal",
            help: "SQLite synchronous level (default full: commits survive power loss)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard value == "full" || value == "normal" else {
                    throw .invalid("--synchronous", value, "expected full or normal")
                }
                config.synchronous = value
            }, current: { $0.synchronous }
        ),
        Setting(
            flag: "--access-log", environment: "DELIVERYD_ACCESS_LOG", placeholder: "on|off",
            help: "one JSON line per request on standard error (default on)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard value == "on" || value == "off" else {
                    throw .invalid("--access-log", value, "expected on or off")
                }
                config.accessLog = value == "on"
            }, current: { $0.accessLog ? "on" : "off" }
        ),
        Setting(
            flag: "--log-level", environment: "DELIVERYD_LOG_LEVEL", placeholder: "debug|info|warning|error",
            help: "least severe log lines written; debug adds one line per accepted push (default info)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                let levels: [String: Logger.Level] = [
                    "debug": .debug, "info": .info, "warning": .warning, "error": .error,
                ]
                guard let level = levels[value] else {
                    throw .invalid("--log-level", value, "expected debug, info, warning or error")
                }
                config.logLevel = level
            }, current: { $0.logLevel.description }
        ),
        integerSetting(
            flag: "--max-body-bytes", environment: "DELIVERYD_MAX_BODY_BYTES", range: 1024...64 * 1024 * 1024,
            help: "largest request body; larger gets 413 (default 1048576)", keyPath: \.maxBodyBytes
        ),
        integerSetting(
            flag: "--max-connections", environment: "DELIVERYD_MAX_CONNECTIONS", range: 16...1_000_000,
            help:
                "open client connections at most; lowered to fit the open-file limit with 256 descriptors to spare (default 20000)",
            keyPath: \.maxConnections
        ),
        integerSetting(
            flag: "--max-connections-per-address", environment: "DELIVERYD_MAX_CONNECTIONS_PER_ADDRESS",
            range: 0...1_000_000,
            help: "open connections one client address may hold; 0 for no cap; raise it behind a proxy (default 256)",
            keyPath: \.maxConnectionsPerAddress
        ),
        Setting(
            flag: "--trusted-proxies", environment: "DELIVERYD_TRUSTED_PROXIES", placeholder: "NETWORKS",
            help:
                "comma-separated IPv4 networks or addresses of load balancers whose Forwarded / X-Forwarded-For name the client (default none: the peer is the client)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                var networks: [IPv4Network] = []
                for item in value.split(separator: ",") {
                    guard let network = IPv4Network(parsing: item.trimmingCharacters(in: .whitespaces)) else {
                        throw .invalid(
                            "--trusted-proxies", value, "expected IPv4 networks such as 10.0.0.0/8,192.0.2.7")
                    }
                    networks.append(network)
                }
                config.trustedProxies = TrustedProxies(networks)
            },
            current: { configuration in
                let networks = configuration.trustedProxies.networks
                return networks.isEmpty ? nil : networks.map(\.description).joined(separator: ",")
            }
        ),
        integerSetting(
            flag: "--personal-data-retention", environment: "DELIVERYD_PERSONAL_DATA_RETENTION", range: 1...3650,
            help:
                "days after an order ended that its customer's name, phone, address, payment, note and destination are kept (default 30)",
            keyPath: \.personalDataRetentionDays
        ),
        integerSetting(
            flag: "--event-loops", environment: "DELIVERYD_EVENT_LOOPS", range: 1...64,
            help: "HTTP event loop threads, each with its own listener; one per core (default 2)",
            keyPath: \.eventLoops
        ),
        integerSetting(
            flag: "--handler-threads", environment: "DELIVERYD_HANDLER_THREADS", range: 1...1024,
            help: "threads that read and check requests and run the reads; no write waits on one (default 8)",
            keyPath: \.handlerThreads
        ),
        integerSetting(
            flag: "--request-timeout", environment: "DELIVERYD_REQUEST_TIMEOUT", range: 1...600,
            help: "seconds a client may take to send one request (default 10)", keyPath: \.requestTimeoutSeconds
        ),
        integerSetting(
            flag: "--idle-timeout", environment: "DELIVERYD_IDLE_TIMEOUT", range: 1...3600,
            help: "seconds an idle keep-alive connection is kept (default 60)", keyPath: \.idleTimeoutSeconds
        ),
        integerSetting(
            flag: "--push-workers", environment: "DELIVERYD_PUSH_WORKERS", range: 1...16,
            help: "push workers sending side by side, each with its own APNs connections (default 2)",
            keyPath: \.pushWorkers
        ),
        Setting(
            flag: "--history-interval", environment: "DELIVERYD_HISTORY_INTERVAL", placeholder: "SECONDS",
            help:
                "seconds between two samples of the dashboard's history; 360 are kept, and 1,440 of every sixth (default 10: an hour and a day)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard let seconds = Double(value), seconds.isFinite, (0.01...600).contains(seconds) else {
                    throw .invalid("--history-interval", value, "expected seconds from 0.01 to 600")
                }
                config.historyIntervalSeconds = seconds
            }, current: { String($0.historyIntervalSeconds) }
        ),
        Setting(
            flag: "--node-name", environment: "DELIVERYD_NODE_NAME", placeholder: "NAME",
            help: "the name this process shows on the dashboard (default: the host's name)", isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard (1...64).contains(value.utf8.count),
                    value.allSatisfy({ $0.isLetter || $0.isNumber || "-_.:".contains($0) })
                else { throw .invalid("--node-name", value, "expected 1 to 64 letters, digits, - _ . or :") }
                config.nodeName = value
            }, current: { $0.nodeName ?? "(host name)" }
        ),
        Setting(
            flag: "--webhook-urls", environment: "DELIVERYD_WEBHOOK_URLS", placeholder: "https|http|local",
            help:
                "which webhook URLs are allowed: https only, also http, or local (also http and private, loopback and link-local addresses, for tests and one machine) (default https)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard ["https", "http", "local"].contains(value) else {
                    throw .invalid("--webhook-urls", value, "expected https, http or local")
                }
                config.webhookURLs = value
            }, current: { $0.webhookURLs }
        ),
        integerSetting(
            flag: "--webhook-timeout", environment: "DELIVERYD_WEBHOOK_TIMEOUT", range: 1...60,
            help: "seconds one webhook attempt may take, connection included (default 10)",
            keyPath: \.webhookTimeoutSeconds
        ),
        Setting(
            flag: "--webhook-retry-schedule", environment: "DELIVERYD_WEBHOOK_RETRY_SCHEDULE",
            placeholder: "S,S,...",
            help:
                "seconds between a failed webhook attempt and the next, comma-separated; after the last the delivery fails (default 5,60,300,1800,7200,18000,36000,50400,72000,72000: about three days)",
            isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                let delays = value.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard (1...50).contains(delays.count),
                    delays.allSatisfy({ $0 != nil && $0!.isFinite && $0! >= 0.1 && $0! <= 604_800 })
                else {
                    throw .invalid(
                        "--webhook-retry-schedule", value, "expected 1 to 50 delays of 0.1 to 604800 seconds")
                }
                config.webhookRetrySchedule = delays.compactMap { $0 }
            },
            current: { config in config.webhookRetrySchedule.map { $0.map { String($0) }.joined(separator: ",") } }
        ),
        integerSetting(
            flag: "--webhook-disable-after", environment: "DELIVERYD_WEBHOOK_DISABLE_AFTER", range: 1...8_760,
            help: "hours an endpoint may fail without delivering anything before it is disabled (default 120)",
            keyPath: \.webhookDisableAfterHours
        ),
        pathSetting(
            flag: "--webhook-ca-file", environment: "DELIVERYD_WEBHOOK_CA_FILE",
            help: "CA bundle webhook receivers' certificates are checked against (default: the system's)",
            keyPath: \.webhookCAFile),
        integerSetting(
            flag: "--push-lease", environment: "DELIVERYD_PUSH_LEASE", range: 1...600,
            help: "seconds a claimed push belongs to its worker; after a crash it is sent again then (default 30)",
            keyPath: \.pushLeaseSeconds
        ),
    ]

    /// An admin key as `--admin-key` or `--admin-key-file` gave it, checked.
    private static func adminKey(_ value: String, flag: String) throws(ConfigurationError) -> String {
        guard value.count >= 16 else { throw .invalid(flag, "…", "must be at least 16 characters") }
        // These prefixes are read as other credentials (an API key id, a tracking token, a customer
        // credential): such an admin key would be accepted here and never work.
        for prefix in ["dk_", "dt_", "dc_"] where value.hasPrefix(prefix) {
            throw .invalid(flag, "…", "must not start with \(prefix), which marks another kind of credential")
        }
        return value
    }

    /// A file's path; the file is read at start-up, where the error can say what is wrong with it.
    private static func pathSetting(
        flag: String, environment: String, help: String,
        keyPath: any WritableKeyPath<Configuration, String?> & Sendable
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, placeholder: "PATH", help: help, isSecret: false,
            apply: { config, value throws(ConfigurationError) in config[keyPath: keyPath] = value },
            current: { $0[keyPath: keyPath] })
    }

    /// The URL of a service deliveryd calls with credentials: https only.
    private static func httpsURLSetting(
        flag: String, environment: String, help: String, keyPath: any WritableKeyPath<Configuration, String> & Sendable
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, placeholder: "URL", help: help, isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                config[keyPath: keyPath] = try httpsURL(value, flag: flag)
            }, current: { $0[keyPath: keyPath] })
    }

    private static func httpsURL(_ value: String, flag: String) throws(ConfigurationError) -> String {
        guard value.hasPrefix("https://") else { throw .invalid(flag, value, "must start with https://") }
        return value
    }

    /// A whole-number setting within `range`.
    private static func integerSetting(
        flag: String, environment: String, range: ClosedRange<Int>, help: String,
        keyPath: any WritableKeyPath<Configuration, Int> & Sendable
    ) -> Setting {
        Setting(
            flag: flag, environment: environment, placeholder: "N", help: help, isSecret: false,
            apply: { config, value throws(ConfigurationError) in
                guard let number = Int(value), range.contains(number) else {
                    throw .invalid(
                        flag, value, "expected a whole number from \(range.lowerBound) to \(range.upperBound)")
                }
                config[keyPath: keyPath] = number
            }, current: { String($0[keyPath: keyPath]) }
        )
    }

    /// Reads flags (`--flag value` or `--flag=value`) over environment variables over defaults.
    /// - Throws: `ConfigurationError` naming the flag or variable that is unknown, missing a value or invalid.
    static func load(arguments: [String], environment: [String: String]) throws(ConfigurationError) -> Configuration {
        var config = Configuration()
        for setting in settings {
            if let value = environment[setting.environment], !value.isEmpty {
                do { try setting.apply(&config, value) } catch { throw error.renamed(setting.environment) }
            }
        }
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            let parts = argument.split(separator: "=", maxSplits: 1)
            let flag = String(parts[0])
            guard let setting = settings.first(where: { $0.flag == flag }) else {
                throw .unknownFlag(argument)
            }
            let value: String
            if parts.count == 2 {
                value = String(parts[1])
            } else if let next = remaining.popFirst() {
                value = next
            } else {
                throw .missingValue(flag)
            }
            try setting.apply(&config, value)
        }
        try config.validate()
        return config
    }

    /// Cross-field rules: an APNs key needs its key id and team id.
    func validate() throws(ConfigurationError) {
        if apnsKeyFile != nil {
            if apnsKeyID == nil { throw .missing("--apns-key-id", because: "--apns-key-file is set") }
            if apnsTeamID == nil { throw .missing("--apns-team-id", because: "--apns-key-file is set") }
            if apnsTopic == nil { throw .missing("--apns-topic", because: "--apns-key-file is set") }
        }
    }

    /// The settings in force, secrets masked, one `name=value` per line, for the start-up log.
    var summary: [(String, String)] {
        Self.settings.compactMap { setting in
            guard let value = setting.current(self) else { return nil }
            return (String(setting.flag.dropFirst(2)), setting.isSecret ? "(set)" : value)
        }
    }

    /// Every setting as an environment file (systemd's `EnvironmentFile=`): each setting's help as a
    /// comment, then its variable, commented out at its default unless `values` sets it.
    /// `deliveryd env-file` prints it, and the Debian package installs it, so it never lacks a setting.
    /// - Throws: `ConfigurationError.unknownFlag` for a variable in `values` that is no setting's.
    static func environmentFile(values: [String: String]) throws(ConfigurationError) -> String {
        for name in values.keys where !settings.contains(where: { $0.environment == name }) {
            throw .unknownFlag(name)
        }
        var text = """
            # deliveryd's settings: one VARIABLE=value per line, read by the systemd unit
            # (EnvironmentFile=) before the process starts; restart deliveryd after a change.
            # A line starting with # is a comment; a commented VARIABLE=value shows the default.
            # Secrets do not belong in this file or on a command line: name a file that holds
            # them (DELIVERYD_ADMIN_KEY_FILE, APNS_KEY_FILE), readable by the deliveryd user only.

            """
        let defaults = Configuration()
        for setting in settings {
            text += "\n" + wrapped(setting.help.prefix(1).uppercased() + setting.help.dropFirst() + ".")
            if let value = values[setting.environment] {
                text += "\(setting.environment)=\(value)\n"
            } else {
                // A default such as "(host name)" describes a value rather than being one.
                let shown = setting.isSecret ? nil : setting.current(defaults).flatMap { $0.hasPrefix("(") ? nil : $0 }
                text += "#\(setting.environment)=\(shown ?? "")\n"
            }
        }
        return text
    }

    /// `text` as `# ` comment lines of at most 100 characters.
    private static func wrapped(_ text: String) -> String {
        var lines: [String] = []
        var line = "#"
        for word in text.split(separator: " ") {
            if line.count + 1 + word.count > 100, line != "#" {
                lines.append(line)
                line = "#"
            }
            line += " " + word
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }

    static var helpText: String {
        var text = """
            deliveryd — keeps iOS Live Activities of delivery orders up to date over APNs.

            usage: deliveryd [options]
                   deliveryd backup PATH [--data-dir DIR]   write a consistent copy of the database to PATH
                   deliveryd migrate-to-postgres [--data-dir DIR] --database-url URL
                                                            copy a stopped SQLite deployment into an empty PostgreSQL database
                   deliveryd keys create --role merchant|rider|admin [--merchant ID] [--rider ID] [--data-dir DIR]
                   deliveryd keys list [--data-dir DIR]
                   deliveryd keys revoke ID [--data-dir DIR]
                   deliveryd env-file [VARIABLE=value ...]  print every setting as a commented environment file
                   deliveryd --version                      print the version, the commit built and the build's day

            options (each also read from the environment variable shown):

            """
        for setting in settings {
            let left = "  \(setting.flag) \(setting.placeholder)"
            text += left + String(repeating: " ", count: max(2, 40 - left.count))
            text += "\(setting.help)\n" + String(repeating: " ", count: 40) + "env \(setting.environment)\n"
        }
        text += "  --help                                print this text\n"
        return text
    }
}

/// Why the configuration cannot be used; printed and the process exits with status 2.
enum ConfigurationError: Error, Equatable, CustomStringConvertible {
    case unknownFlag(String)
    case missingValue(String)
    case missing(String, because: String)
    case invalid(String, String, String)

    func renamed(_ name: String) -> ConfigurationError {
        if case .invalid(_, let value, let reason) = self { return .invalid(name, value, reason) }
        return self
    }

    var description: String {
        switch self {
        case .unknownFlag(let flag): "unknown option \(flag) (see deliveryd --help)"
        case .missingValue(let flag): "\(flag) needs a value"
        case .missing(let flag, let because): "\(flag) is required because \(because)"
        case .invalid(let name, let value, let reason): "invalid \(name) \(value): \(reason)"
        }
    }
}
