import Foundation
package import PostgresStorage
package import Storage
import Synchronization

/// The store a test runs on: SQLite in the test's directory, or, when the suite runs again with
/// `DELIVERYD_TEST_DATABASE=postgresql` (as `make test` does for the API tests), PostgreSQL: one
/// server for the test process, a database of its own for each directory.
package enum TestStore {
    package static var usesPostgres: Bool {
        ProcessInfo.processInfo.environment["DELIVERYD_TEST_DATABASE"] == "postgresql"
    }

    /// A store on `place`; opening the same place again is a second handle (another node) on the same data.
    package static func open(_ place: String) throws -> any DeliveryStore {
        usesPostgres
            ? try postgres(place, poolSize: 2) : try Database.open(StorageConfiguration(dataDirectory: place))
    }

    /// The PostgreSQL store of `place`, its database created the first time.
    package static func postgres(_ place: String, poolSize: Int = 4) throws -> PostgresStore {
        try PostgresStore.open(url: try postgresURL(place), poolSize: poolSize)
    }

    /// The URL of `place`'s PostgreSQL database (with this binary's schema), created the first time.
    package static func postgresURL(_ place: String) throws -> String {
        try databases.withLock { urls throws -> String in
            if let url = urls[place] { return url }
            let url = try newDatabase()
            urls[place] = url
            return url
        }
    }

    /// Tests run side by side, each store with its own pool: room for a few hundred connections.
    private static let server = Result { try PostgresServer(settings: ["max_connections": "400"]) }
    private static let databases = Mutex<[String: String]>([:])

    /// A copy of a database already migrated: copying its files is far quicker than running the
    /// migrations for every test.
    private static func newDatabase() throws -> String {
        let postgres = try server.get()
        let template = try template.get()
        let name = "store_" + UUID().uuidString.prefix(13).lowercased().replacingOccurrences(of: "-", with: "")
        try postgres.administer("CREATE DATABASE \(name) OWNER deliveryd TEMPLATE \(template)")
        return "postgresql://deliveryd:deliveryd@127.0.0.1:\(postgres.port)/\(name)"
    }

    /// The template's name, once it holds the schema (and no connection, which a copy requires).
    private static let template = Result { () throws -> String in
        let postgres = try server.get()
        try postgres.administer("CREATE DATABASE deliveryd_template OWNER deliveryd")
        _ = try PostgresStore.open(
            url: "postgresql://deliveryd:deliveryd@127.0.0.1:\(postgres.port)/deliveryd_template", poolSize: 1)
        return "deliveryd_template"
    }
}
