"""A webhook receiver for deliveryd's tests: verifies every delivery with the reference
Standard Webhooks library and records it, answering as its control file says.

Each request appends one JSON line to --record: the headers deliveryd sent, the body, whether the
signature verified with one of the secrets in --secrets (read at every request, so a test can
rotate), and the status answered. --control holds {"status": 200, "retry_after": null,
"hang_seconds": 0, "location": null, "headers": {}}, also read at every request ("headers": more
response headers, as given).
"""

import argparse
import json
import os
import ssl
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError


def read_json(path, default):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        control = read_json(self.server.control, {})
        secrets = read_json(self.server.secrets, [])
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified_with = None
        for index, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified_with = index
                break
            except WebhookVerificationError:
                continue
        status = int(control.get("status", 200))
        record = {
            "path": self.path,
            "headers": headers,
            "body": body.decode("utf-8", "replace"),
            "verified": verified_with is not None,
            "verified_with": verified_with,
            "status": status,
            "received_at": time.time(),
            "alpn": self.connection.selected_alpn_protocol() if isinstance(self.connection, ssl.SSLSocket) else None,
        }
        with open(self.server.record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        hang = float(control.get("hang_seconds", 0))
        if hang:
            time.sleep(hang)
        self.send_response(status)
        if control.get("retry_after") is not None:
            self.send_header("Retry-After", str(control["retry_after"]))
        if control.get("location"):
            self.send_header("Location", control["location"])
        for name, value in control.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *arguments):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--secrets", required=True)
    parser.add_argument("--tls-directory", help="serve HTTPS with server.pem and server.key from here, "
                        "offering HTTP/2 and HTTP/1.1 (it speaks only the latter)")
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Receiver)
    if options.tls_directory:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(os.path.join(options.tls_directory, "server.pem"),
                                os.path.join(options.tls_directory, "server.key"))
        context.set_alpn_protocols(["h2", "http/1.1"])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    server.record = options.record
    server.control = options.control
    server.secrets = options.secrets
    server.serve_forever()


if __name__ == "__main__":
    main()
