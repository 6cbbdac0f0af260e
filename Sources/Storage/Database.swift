internal import Foundation
internal import Synchronization

/// deliveryd's database file: one writer connection, guarded so that one caller at a time uses it.
public final class Database: Sendable {
    private let writer: Mutex<SQLiteConnection>
    public let configuration: StorageConfiguration

    private init(writer: sending SQLiteConnection, configuration: StorageConfiguration) {
        self.writer = Mutex(writer)
        self.configuration = configuration
    }

    /// Creates the data directory if needed and opens the file with deliveryd's pragmas.
    /// - Throws: `StorageError` when the directory cannot be created or the file cannot be opened.
    public static func open(_ configuration: StorageConfiguration) throws(StorageError) -> Database {
        do {
            try FileManager.default.createDirectory(
                atPath: configuration.dataDirectory, withIntermediateDirectories: true
            )
        } catch {
            throw StorageError(
                "cannot create the data directory \(configuration.dataDirectory): \(error.localizedDescription)")
        }
        do {
            let connection = try SQLiteConnection.open(configuration)
            return Database(writer: connection, configuration: configuration)
        } catch {
            throw StorageError("cannot open \(configuration.databasePath): \(error)")
        }
    }

    /// The database file's path.
    public var path: String { configuration.databasePath }

    /// The journal mode in force (`wal`).
    public var journalMode: String {
        writer.withLock { (try? $0.journalMode()) ?? "unknown" }
    }
}

/// A storage failure as the service reports it.
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
