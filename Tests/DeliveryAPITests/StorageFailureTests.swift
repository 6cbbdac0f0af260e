import HTTPServer
import Storage
import Testing

@testable import DeliveryAPI

@Suite("Storage failures as answers")
struct StorageFailureTests {
    /// What a client may retry is 503 with `Retry-After` and the reason; a cap reached is 429; the
    /// rest, a fault of ours, is 500 without the database's message.
    @Test(arguments: [
        (StorageError.Code.full, 503, "disk_full" as String?), (.busy, 503, "busy"), (.unavailable, 503, "unavailable"),
        (.constraint, 500, nil), (.corrupt, 500, nil), (.io, 500, nil), (.failed, 500, nil),
    ])
    func retryableFailuresAre503(code: StorageError.Code, status: Int, reason: String?) {
        let answer = APIError(StorageError(code, "the database's own words")).response
        #expect(answer.status == status)
        let body = String(decoding: answer.body, as: UTF8.self)
        #expect(!body.contains("the database's own words"))
        if let reason {
            #expect(body.contains(#""reason":"\#(reason)""#), "\(body)")
            #expect(answer.headers.contains { $0.0 == "Retry-After" })
        }
    }
}
