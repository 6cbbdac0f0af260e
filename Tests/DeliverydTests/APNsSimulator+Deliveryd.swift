import Foundation
import TestSupport

extension APNsSimulator {
    /// The flags that point deliveryd at this simulator, with the test key as the default app's key.
    var deliverydArguments: [String] {
        [
            "--apns-key-file", directory + "/signing.pem", "--apns-key-id", "ABC123DEFG",
            "--apns-team-id", "DEF123GHIJ", "--apns-topic", "com.example.app",
            "--apns-development-url", baseURL, "--apns-production-url", baseURL, "--apns-ca-file", caFile,
        ]
    }
}

extension FCMSimulator {
    /// The flags that point deliveryd at this simulator: its service account's key file (written
    /// next to the simulator's files, naming the simulator's token endpoint), its API and its CA.
    func deliverydArguments() throws -> [String] {
        let keyFile = directory + "/service-account.json"
        try Data(serviceAccountJSON).write(to: URL(fileURLWithPath: keyFile))
        return ["--fcm-service-account-file", keyFile, "--fcm-url", baseURL, "--fcm-ca-file", caFile]
    }
}
