import DeliveryAPI
import Foundation
import HTTPServer
import Projection
import Pusher
import Storage
import Webhooks

/// What each module is given from the settings: every module's settings start at its own defaults,
/// and only what a flag or variable sets is changed here.
extension Configuration {
    var storage: StorageConfiguration {
        StorageConfiguration(dataDirectory: dataDirectory, synchronous: synchronous == "normal" ? .normal : .full)
    }

    var projection: ProjectionConfiguration {
        var projection = ProjectionConfiguration()
        projection.staleGrace = Double(staleGraceSeconds)
        projection.minimumFreshness = Double(minimumFreshnessSeconds)
        projection.dismissalDelay = Double(dismissalDelaySeconds)
        projection.highPriorityBudgetPerHour = highPriorityBudget
        projection.startLeadTime = Double(startLeadTimeSeconds)
        return projection
    }

    /// The failure limits refill their burst in a minute; the request limits allow bursts of two
    /// (a key) and four (an app) seconds' worth.
    var rateLimits: RateLimits {
        var limits = RateLimits()
        limits.failedAuthenticationsPerAddress = RateLimit(
            burst: Double(authFailuresPerAddress), perSecond: Double(authFailuresPerAddress) / 60)
        limits.failedAuthenticationsPerKey = RateLimit(
            burst: Double(authFailuresPerKey), perSecond: Double(authFailuresPerKey) / 60)
        limits.requestsPerKey = RateLimit(burst: Double(2 * requestsPerKey), perSecond: Double(requestsPerKey))
        limits.requestsPerApp = RateLimit(burst: Double(4 * requestsPerApp), perSecond: Double(requestsPerApp))
        limits.activitiesPerOrder = activitiesPerOrder
        limits.devicesPerCustomer = devicesPerCustomer
        return limits
    }

    var httpServer: HTTPServerConfiguration {
        var server = HTTPServerConfiguration(address: listen, eventLoops: eventLoops)
        server.handlerThreads = handlerThreads
        server.limits.maxBodyBytes = maxBodyBytes
        server.requestTimeout = Double(requestTimeoutSeconds)
        server.idleTimeout = Double(idleTimeoutSeconds)
        server.maxConnections = maxConnections
        server.maxConnectionsPerAddress = maxConnectionsPerAddress
        server.trustedProxies = trustedProxies
        return server
    }

    var pusher: PusherConfiguration {
        var pusher = PusherConfiguration()
        pusher.developmentURL = apnsDevelopmentURL
        pusher.productionURL = apnsProductionURL
        pusher.lease = Double(pushLeaseSeconds)
        pusher.projection = projection
        return pusher
    }

    /// `webhookURLs`: `https` only, `http` too, or `local`: http and private networks as well.
    var webhookPolicy: WebhookURLPolicy {
        WebhookURLPolicy(allowsHTTP: webhookURLs != "https", allowsPrivateNetworks: webhookURLs == "local")
    }

    var webhookDispatcher: WebhookDispatcherConfiguration {
        var webhooks = WebhookDispatcherConfiguration(policy: webhookPolicy)
        webhooks.timeoutSeconds = Double(webhookTimeoutSeconds)
        webhooks.retrySchedule = webhookRetrySchedule.map(WebhookRetrySchedule.init(delays:)) ?? .standard
        webhooks.disableAfter = Double(webhookDisableAfterHours) * 3_600
        webhooks.caFile = webhookCAFile
        return webhooks
    }

    /// Whether pushes go to APNs: an app key is configured; without one the log sender records them.
    var usesAPNs: Bool { apnsKeyFile != nil || !apnsApps.isEmpty }

    /// The apps pushes go to APNs for: the main app's topic, then the further apps'.
    var apnsBundleIDs: [String] { [apnsTopic].compactMap { $0 } + apnsApps.map(\.bundleID) }

    /// The apps a registration may name; `nil` without APNs (the log sender takes every app).
    var knownBundleIDs: Set<String>? { usesAPNs ? Set(apnsBundleIDs) : nil }

    /// - Parameters:
    ///   - databaseHealth: the PostgreSQL pool's state; `nil` on SQLite.
    ///   - androidProject: the FCM service account's project; `nil` without FCM.
    func deliveryService(
        databaseHealth: (@Sendable () -> ConnectionPoolHealth)?, androidProject: String?
    ) -> DeliveryServiceConfiguration {
        var service = DeliveryServiceConfiguration(defaultBundleID: apnsTopic)
        service.projection = projection
        service.knownBundleIDs = knownBundleIDs
        service.trackingTokenLifetime = Double(trackingTokenLifetimeSeconds)
        service.rateLimits = rateLimits
        service.ridePushInterval = Double(ridePushIntervalSeconds)
        // On SQLite this process is the only writer, and forgets a rider's orders when they change;
        // on PostgreSQL another node may change them, seen here within a second.
        service.riderOrdersLifetime = databaseURL == nil ? 30 : 1
        service.historyStep = historyIntervalSeconds
        service.nodeName = nodeName ?? ProcessInfo.processInfo.hostName
        service.databaseHealth = databaseHealth
        service.startRegistrationTimeout = Double(startRegistrationTimeoutSeconds)
        service.webhookPolicy = webhookPolicy
        service.statsMaximumAge = 30
        service.build = .current
        service.androidProject = androidProject
        return service
    }
}
