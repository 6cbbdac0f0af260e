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
