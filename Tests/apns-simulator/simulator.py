"""A local APNs stand-in for the pusher's tests: HTTP/2 over TLS, checking requests as APNs does.

Each request to /3/device/<token> is checked (method, path, push type, topic suffix, priority,
ES256 provider token signature and age, payload size) and recorded as one JSON line in the record
file. Answers can be scripted per device token through the control file (JSON object mapping a
token to {"status": N, "reason": "...", "timestamp": ms}); the key "*" may give a random failure mix for
every other token ({"failure_fraction": 0.3, "failures": [[503, "ServiceUnavailable"], [429, ...]]}) and
a delay for the others ({"delay_ms": 3000});
unscripted valid requests get 200. With --droppable the server sits behind a TCP relay in this
process, and a token scripted {"drop_once": true} makes the first request for it cut every client
connection at once (no answer, no GOAWAY, as when a network path or a peer dies); later requests
for it get 200.

usage: simulator.py --port N --cert CERT --key KEY --public-key PEM --record FILE [--control FILE]
                    [--app-key KID:BUNDLE_ID:PEM ...]   (a key bound to one app's topic)
                    [--droppable]
"""
import argparse
import asyncio
import base64
import json
import random
import time
import uuid

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from relay import h2_config, read_body, serve_on


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Simulator:
    def __init__(self, public_key, record_path, control_path, app_keys=None, relay=None):
        self.relay = relay
        self.dropped = set()
        self.public_key = public_key
        # key id -> (public key, bundle id): a provider token with this kid verifies with that key only,
        # and only for that app's topic, as APNs binds a key to its team's apps.
        self.app_keys = app_keys or {}
        self.record_path = record_path
        self.control_path = control_path

    def scripted(self, token):
        if not self.control_path:
            return None
        try:
            with open(self.control_path) as control:
                answers = json.load(control)
        except (OSError, ValueError):
            return None
        if token in answers:
            return answers[token]
        default = answers.get("*")
        if not default:
            return None
        if random.random() < default.get("failure_fraction", 0):
            status, reason = random.choice(default["failures"])
            return {"status": status, "reason": reason}
        return {"status": 200, "delay_ms": default.get("delay_ms", 0)}

    def check_token(self, authorization, topic=""):
        if not authorization.startswith("bearer "):
            return "MissingProviderToken"
        parts = authorization[7:].split(".")
        if len(parts) != 3:
            return "InvalidProviderToken"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            raw = b64url_decode(parts[2])
        except ValueError:
            return "InvalidProviderToken"
        if header.get("alg") != "ES256" or len(raw) != 64 or not isinstance(claims.get("iat"), int):
            return "InvalidProviderToken"
        signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        public_key = self.public_key
        if header.get("kid") in self.app_keys:
            public_key, bundle = self.app_keys[header["kid"]]
            if topic != bundle + ".push-type.liveactivity":
                return "TopicDisallowed"
        elif any(topic == bundle + ".push-type.liveactivity" for _, bundle in self.app_keys.values()):
            return "TopicDisallowed"  # an app with a key of its own takes no other key
        try:
            public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return "InvalidProviderToken"
        if time.time() - claims["iat"] > 3600:
            return "ExpiredProviderToken"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        path = scope["path"]
        token = path[len("/3/device/"):] if path.startswith("/3/device/") else ""
        reason, status, extra = None, 200, {}
        if scope["method"] != "POST":
            status, reason = 405, "MethodNotAllowed"
        elif not token:
            status, reason = 404, "BadPath"
        elif (auth := self.check_token(headers.get("authorization", ""), headers.get("apns-topic", ""))) is not None:
            status, reason = (400 if auth == "TopicDisallowed" else 403), auth
        elif headers.get("apns-push-type") != "liveactivity":
            status, reason = 400, "InvalidPushType"
        elif not headers.get("apns-topic", "").endswith(".push-type.liveactivity"):
            status, reason = 400, "DeviceTokenNotForTopic"
        elif headers.get("apns-priority", "10") not in ("5", "10"):
            status, reason = 400, "BadPriority"
        elif not body:
            status, reason = 400, "PayloadEmpty"
        elif len(body) > 4096:
            status, reason = 413, "PayloadTooLarge"
        elif (script := self.scripted(token)) is not None:
            if script.get("drop_once") and self.relay and token not in self.dropped:
                self.dropped.add(token)
                with open(self.record_path + ".drops", "a") as drops:
                    drops.write(token + "\n")
                self.relay.drop()
                return
            status, reason = script.get("status", 200), script.get("reason")
            if "timestamp" in script:
                extra["timestamp"] = script["timestamp"]
            if script.get("delay_ms"):
                # Delayed answers are announced on arrival, so a test can see requests in flight.
                with open(self.record_path + ".arrivals", "a") as arrivals:
                    arrivals.write(token + "\n")
                await asyncio.sleep(script["delay_ms"] / 1000)
        apns_id = headers.get("apns-id") or str(uuid.uuid4())
        with open(self.record_path, "a") as record:
            record.write(json.dumps({
                "token": token, "status": status, "reason": reason, "headers": headers,
                "payload": body.decode(errors="replace"), "apns_id": apns_id, "received_at": time.time(),
            }) + "\n")
        response_body = json.dumps({"reason": reason, **extra}).encode() if reason else b""
        response_headers = [(b"apns-id", apns_id.encode())]
        if response_body:
            response_headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": response_body})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--public-key", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--control")
    parser.add_argument("--app-key", action="append", default=[], help="KID:BUNDLE_ID:PUBLIC_KEY_PEM")
    parser.add_argument("--droppable", action="store_true", help="serve behind a relay that can cut connections")
    arguments = parser.parse_args()
    with open(arguments.public_key, "rb") as pem:
        public_key = serialization.load_pem_public_key(pem.read())
    app_keys = {}
    for entry in arguments.app_key:
        kid, bundle, path = entry.split(":", 2)
        with open(path, "rb") as pem:
            app_keys[kid] = (serialization.load_pem_public_key(pem.read()), bundle)
    asyncio.run(run(arguments, public_key, app_keys))


async def run(arguments, public_key, app_keys):
    config = h2_config(arguments.cert, arguments.key)
    await serve_on(arguments.port, arguments.droppable, config,
                   lambda relay: Simulator(public_key, arguments.record, arguments.control, app_keys, relay))


if __name__ == "__main__":
    main()
