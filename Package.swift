// swift-tools-version:6.0
import PackageDescription

/// Compiler hygiene shared by every Swift target: explicit `any`, imports that are internal unless
/// a public signature needs them, and members visible only through a direct import.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "deliveryd",
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: [
        .executable(name: "deliveryd", targets: ["deliveryd"]),
        // What the iOS app depends on: the widget extension needs the contract, the app both.
        .library(name: "DeliveryActivityContract", targets: ["DeliveryActivityContract"]),
        .library(name: "DeliveryActivityClient", targets: ["DeliveryActivityClient"]),
    ],
    targets: [
        // C libraries, reached only through these system-library targets.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // epoll, eventfd and accept4, which Glibc's Swift module lacks.
        .target(name: "CLinuxShim"),
        // SQLite's page cache behind a wrapper that spares commits a scan of the whole cache.
        .target(name: "CSQLitePageCache", dependencies: ["CSQLite"]),
        // The commit and date of a build, linked in by `make build` (see its source).
        .target(name: "CBuildStamp"),

        // The contract with the iOS app: the Live Activity's types, and the calls the app makes.
        .target(name: "DeliveryActivityContract", swiftSettings: strictSettings),
        .target(
            name: "DeliveryActivityClient", dependencies: ["DeliveryActivityContract"], swiftSettings: strictSettings
        ),

        // The core: pure values, no I/O.
        .target(name: "OrderDomain", dependencies: ["DeliveryActivityContract"], swiftSettings: strictSettings),
        .target(
            name: "Projection", dependencies: ["OrderDomain", "DeliveryActivityContract", "JSONSyntax"],
            swiftSettings: strictSettings
        ),

        // OpenSSL behind Swift types: ES256 signing, SHA-256, secrets.
        .target(name: "Cryptography", dependencies: ["COpenSSL"], swiftSettings: strictSettings),

        // Metrics and structured logs, shared by the edges.
        .target(name: "JSONSyntax", swiftSettings: strictSettings),

        .target(name: "Telemetry", dependencies: ["JSONSyntax"], swiftSettings: strictSettings),

        // The edges.
        .target(name: "Lifecycle", dependencies: ["Telemetry"], swiftSettings: strictSettings),

        .target(
            name: "HTTPServer", dependencies: ["CLinuxShim", "JSONSyntax", "Telemetry", "Lifecycle"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "Storage",
            dependencies: ["OrderDomain", "JSONSyntax", "Telemetry", "CSQLite", "CSQLitePageCache"],
            // The SQL migrations (`db/` links here) ship with the binary as a resource.
            resources: [.copy("Migrations")],
            swiftSettings: strictSettings
        ),
        // The PostgreSQL backend, for several nodes on a replicated database (libpq).
        .target(
            name: "PostgresStorage", dependencies: ["Storage", "CLibPQ"],
            // Its own migrations: the same schema in PostgreSQL's types.
            resources: [.copy("Migrations")], swiftSettings: strictSettings
        ),
        .target(
            name: "Pusher",
            dependencies: [
                "OrderDomain", "DeliveryActivityContract", "Projection", "Storage", "Cryptography", "Telemetry",
                "Lifecycle", "JSONSyntax", "CCurl",
            ],
            swiftSettings: strictSettings
        ),
        // Webhooks out: signing (Standard Webhooks), the address policy, and the dispatcher that
        // drains their outbox through libcurl, apart from the pusher.
        .target(
            name: "Webhooks",
            dependencies: ["Storage", "Cryptography", "Telemetry", "Lifecycle", "CCurl", "CLinuxShim"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "DeliveryAPI",
            dependencies: [
                "OrderDomain", "DeliveryActivityContract", "Projection", "HTTPServer", "Storage", "Pusher",
                "Cryptography", "Telemetry", "Webhooks", "JSONSyntax",
            ],
            // The admin dashboard page ships with the binary.
            resources: [.copy("Resources/admin.html")],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "deliveryd",
            dependencies: [
                "DeliveryAPI", "OrderDomain", "Projection", "Pusher", "Storage", "PostgresStorage", "HTTPServer",
                "Cryptography", "Webhooks", "Telemetry", "Lifecycle", "CBuildStamp",
            ],
            swiftSettings: strictSettings
        ),

        // Benchmarks, built in release by `make bench-*`.
        .executableTarget(
            name: "projection-bench",
            dependencies: ["OrderDomain", "Projection"],
            path: "bench/projection",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "storage-bench",
            dependencies: ["OrderDomain", "Storage", "TestSupport"],
            path: "bench/storage",
            swiftSettings: strictSettings
        ),

        .executableTarget(
            name: "pusher-bench",
            dependencies: ["Cryptography", "OrderDomain", "Pusher", "Storage", "Telemetry", "TestSupport"],
            path: "bench/pusher",
            swiftSettings: strictSettings
        ),

        // Helpers shared by the test targets: built executables, loopback sockets.
        .target(
            name: "TestSupport", dependencies: ["OrderDomain", "Storage", "PostgresStorage"], path: "Tests/TestSupport",
            swiftSettings: strictSettings),

        // The `.heavy` trait: tests that block on processes and servers run on threads of their own.
        .target(
            name: "TestScheduling", dependencies: ["Lifecycle"], path: "Tests/TestScheduling",
            swiftSettings: strictSettings),

        .testTarget(name: "OrderDomainTests", dependencies: ["OrderDomain"], swiftSettings: strictSettings),
        .testTarget(name: "TelemetryTests", dependencies: ["Telemetry"], swiftSettings: strictSettings),
        .testTarget(name: "JSONSyntaxTests", dependencies: ["JSONSyntax"], swiftSettings: strictSettings),
        .testTarget(
            name: "LifecycleTests", dependencies: ["Lifecycle", "Telemetry", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "CryptographyTests", dependencies: ["Cryptography"], swiftSettings: strictSettings),
        .testTarget(
            name: "WebhooksTests",
            dependencies: ["Webhooks", "Storage", "OrderDomain", "Cryptography", "Telemetry", "TestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ProjectionTests", dependencies: ["Projection", "DeliveryActivityContract"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DeliveryActivityContractTests",
            dependencies: ["DeliveryActivityContract", "DeliveryActivityClient", "Projection", "OrderDomain"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PostgresStorageTests",
            dependencies: ["PostgresStorage", "Storage", "OrderDomain", "TestSupport", "TestScheduling"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StorageTests",
            dependencies: ["CSQLite", "Storage", "PostgresStorage", "StorageCrashWriter", "TestSupport"],
            swiftSettings: strictSettings
        ),
        // The child process the storage crash test kills.
        .executableTarget(
            name: "StorageCrashWriter",
            dependencies: ["Storage", "OrderDomain", "TestSupport"],
            path: "Tests/StorageCrashWriter",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PusherTests",
            dependencies: [
                "Pusher", "Storage", "OrderDomain", "Projection", "Cryptography", "Telemetry", "TestSupport",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DeliveryAPITests",
            dependencies: ["DeliveryAPI", "HTTPServer", "OrderDomain", "Projection", "Storage", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DeliverydTests",
            dependencies: [
                "HTTPServer", "TestSupport", "TestScheduling", "DeliveryActivityContract", "DeliveryActivityClient",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["HTTPServer", "Telemetry", "TestSupport"],
            swiftSettings: strictSettings
        ),
    ]
)
