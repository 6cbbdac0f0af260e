import Cryptography
import Foundation
import HTTPServer

/// The admin dashboard: one self-contained HTML page (no external scripts, fonts or styles) that
/// asks for an admin key and polls `/v1/admin/stats`. The page holds no data; the key opens it.
///
/// Its policy allows exactly the page's own script and style, by their SHA-256 (no `unsafe-inline`:
/// markup that found its way into the page could not run), and requests to this origin only.
enum AdminDashboard {
    static let response: HTTPResponse = {
        guard let url = Bundle.module.url(forResource: "admin", withExtension: "html"),
            let data = try? Data(contentsOf: url)
        else { preconditionFailure("the dashboard page is missing from the DeliveryAPI resources") }
        let page = Array(data)
        return HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Security-Policy", contentSecurityPolicy(for: page)),
                ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
            ],
            body: page)
    }()

    static func contentSecurityPolicy(for page: [UInt8]) -> String {
        let text = String(decoding: page, as: UTF8.self)
        func hashes(of element: String) -> String {
            var sources: [String] = []
            var rest = text[...]
            while let open = rest.range(of: "<\(element)>"),
                let close = rest[open.upperBound...].range(of: "</\(element)>")
            {
                let body = rest[open.upperBound..<close.lowerBound]
                sources.append("'sha256-" + Data(SHA256.digest(Array(body.utf8))).base64EncodedString() + "'")
                rest = rest[close.upperBound...]
            }
            precondition(!sources.isEmpty, "the dashboard page has no <\(element)> element")
            return sources.joined(separator: " ")
        }
        return "default-src 'none'; script-src \(hashes(of: "script")); style-src \(hashes(of: "style")); "
            + "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    }
}
