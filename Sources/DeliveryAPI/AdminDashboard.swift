import Foundation
import HTTPServer

/// The admin dashboard: one self-contained HTML page (no external scripts, fonts or styles) that
/// asks for an admin key and polls `/v1/admin/stats`. The page holds no data; the key opens it.
enum AdminDashboard {
    static let response: HTTPResponse = {
        guard let url = Bundle.module.url(forResource: "admin", withExtension: "html"),
            let page = try? Data(contentsOf: url)
        else { preconditionFailure("the dashboard page is missing from the DeliveryAPI resources") }
        return HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/html; charset=utf-8"),
                (
                    "Content-Security-Policy",
                    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
                        + "base-uri 'none'; form-action 'none'"
                ),
                ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
            ],
            body: Array(page))
    }()
}
