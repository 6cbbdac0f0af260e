"""A webhook receiver for deliveryd's tests: verifies every delivery with the reference
Standard Webhooks library and records it, answering as its control file says.

Each request appends one JSON line to --record: the headers deliveryd sent, the body, whether the
signature verified with one of the secrets in --secrets (read at every request, so a test can
rotate), and the status answered. --control holds {"status": 200, "retry_after": null,
"hang_seconds": 0, "location": null}, also read at every request.
"""

import argparse
import json
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
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Receiver)
    server.daemon_threads = True
    server.record = options.record
    server.control = options.control
    server.secrets = options.secrets
    server.serve_forever()


if __name__ == "__main__":
    main()
