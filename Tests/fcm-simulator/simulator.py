"""A local FCM stand-in for the Android pusher's tests: HTTP/2 over TLS, an OAuth 2 token endpoint
and the HTTP v1 send API, checking requests as Google does.

POST /token takes the JWT bearer grant (RFC 7523): the assertion is verified with PyJWT (RS256)
against the service account's public key, its issuer, audience (this endpoint's URL) and scope
checked, and an access token valid for --token-lifetime seconds is issued. POST
/v1/projects/<project>/messages:send needs one of those tokens (else 401 UNAUTHENTICATED), the
service account's project (else 403 SENDER_ID_MISMATCH), and a message of FCM's shape: a token, a
flat map of string data of at most 4,096 bytes, no notification, android.priority HIGH or NORMAL,
android.ttl in seconds, and no collapse_key (deliveryd must not ask FCM to collapse: FCM throttles
collapsible messages per device); else 400 INVALID_ARGUMENT naming the field. Every request is
recorded as one JSON line in the record file.

Answers can be scripted per registration token in the control file (a JSON object mapping a token
to {"status": N, "code": "UNREGISTERED", "retry_after": S} or {"invalid_token": true}); with
--droppable the server sits behind a relay, and {"drop_once": true} makes the first request for the
token cut every client connection; later requests get 200.

usage: simulator.py --port N --cert CERT --key KEY --account-public-key PEM --client-email EMAIL
                    --project ID --record FILE [--control FILE] [--token-lifetime S] [--droppable]
"""
import argparse
import asyncio
import itertools
import json
import os
import re
import sys
import time
import urllib.parse
import uuid

import jwt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apns-simulator"))
from relay import h2_config, read_body, serve_on  # noqa: E402

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
TTL = re.compile(r"^\d+(\.\d{1,9})?s$")


def error_body(status, code, message, field=None):
    """FCM's error shape: the API status, and FCM's own code in the details."""
    api_status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}.get(status, "UNKNOWN")
    details = [{"@type": FCM_ERROR, "errorCode": code}] if code else []
    if field:
        details.append({"@type": BAD_REQUEST, "fieldViolations": [{"field": field, "description": message}]})
    return {"error": {"code": status, "message": message, "status": api_status, "details": details}}


class Simulator:
    def __init__(self, arguments, public_key, relay):
        self.arguments = arguments
        self.public_key = public_key
        self.relay = relay
        self.token_url = f"https://127.0.0.1:{arguments.port}/token"
        self.access_tokens = {}
        self.dropped = set()
        self.message_ids = itertools.count(1)

    def record(self, entry):
        with open(self.arguments.record, "a") as record:
            record.write(json.dumps({**entry, "received_at": time.time()}) + "\n")

    def scripted(self, token):
        if not self.arguments.control:
            return None
        try:
            with open(self.arguments.control) as control:
                return json.load(control).get(token)
        except (OSError, ValueError):
            return None

    def grant(self, body):
        """The token endpoint: (status, JSON body)."""
        form = urllib.parse.parse_qs(body.decode(errors="replace"))
        if form.get("grant_type") != [GRANT] or len(form.get("assertion", [])) != 1:
            return 400, {"error": "unsupported_grant_type", "error_description": "expected the JWT bearer grant"}
        try:
            claims = jwt.decode(form["assertion"][0], self.public_key, algorithms=["RS256"],
                                audience=self.token_url, issuer=self.arguments.client_email,
                                options={"require": ["iss", "aud", "iat", "exp", "scope"]})
        except jwt.PyJWTError as error:
            return 400, {"error": "invalid_grant", "error_description": f"assertion refused: {error}"}
        if SCOPE not in claims["scope"].split() or claims["exp"] - claims["iat"] > 3600:
            return 400, {"error": "invalid_scope", "error_description": "scope or lifetime refused"}
        token = f"ya29.sim-{uuid.uuid4().hex}"
        self.access_tokens[token] = time.time() + self.arguments.token_lifetime
        self.record({"kind": "token", "status": 200, "claims": claims})
        return 200, {"access_token": token, "expires_in": self.arguments.token_lifetime, "token_type": "Bearer"}

    def check_message(self, body):
        """(status, code, message, field) of a send request's refusal, or None when its shape is right."""
        try:
            message = json.loads(body)["message"]
        except (ValueError, KeyError, TypeError):
            return 400, None, "the body is not {\"message\": {...}}", "message"
        if not isinstance(message, dict):
            return 400, None, "message is not an object", "message"
        if not isinstance(message.get("token"), str) or not message["token"]:
            return 400, None, "message.token is missing", "message.token"
        if "notification" in message:
            return 400, None, "deliveryd sends data-only messages", "message.notification"
        data = message.get("data")
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            return 400, None, "data must be a flat map of strings", "message.data"
        if sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) > 4096:
            return 400, "INVALID_ARGUMENT", "data is over 4096 bytes", "message.data"
        android = message.get("android", {})
        if android.get("priority") not in ("HIGH", "NORMAL"):
            return 400, None, "android.priority must be HIGH or NORMAL", "message.android.priority"
        if not TTL.match(str(android.get("ttl", ""))):
            return 400, None, "android.ttl must be seconds, as \"3600s\"", "message.android.ttl"
        if "collapse_key" in android:
            return 400, None, "deliveryd must not collapse: FCM throttles collapsible messages", \
                "message.android.collapse_key"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        path = scope["path"]
        extra_headers = []
        if scope["method"] == "POST" and path == "/token":
            status, answer = self.grant(body)
            return await self.answer(send, status, answer)
        match = re.fullmatch(r"/v1/projects/([^/]+)/messages:send", path)
        if scope["method"] != "POST" or not match:
            return await self.answer(send, 404, error_body(404, None, "no such method"))
        project = match.group(1)
        authorization = headers.get("authorization", "")
        token = authorization[7:] if authorization.startswith("Bearer ") else ""
        entry = {"kind": "send", "project": project, "body": body.decode(errors="replace")}
        try:
            device = json.loads(body)["message"]["token"]
        except (ValueError, KeyError, TypeError):
            device = ""
        entry["token"] = device
        refusal, retry_after = None, None
        if self.access_tokens.get(token, 0) < time.time():
            refusal = 401, None, "the access token is missing, unknown or expired", None
        elif project != self.arguments.project:
            refusal = 403, "SENDER_ID_MISMATCH", "this account sends for another project", None
        elif (shape := self.check_message(body)) is not None:
            refusal = shape
        elif (script := self.scripted(device)) is not None:
            if script.get("drop_once") and self.relay and device not in self.dropped:
                self.dropped.add(device)
                self.record({**entry, "status": None, "dropped": True})
                self.relay.drop()
                return
            if script.get("invalid_token"):
                refusal = 400, "INVALID_ARGUMENT", "the registration token is not a valid FCM token", "message.token"
            elif script.get("status", 200) != 200:
                refusal = script["status"], script.get("code"), "scripted", None
                retry_after = script.get("retry_after")
        if refusal:
            status, code, text, field = refusal
            self.record({**entry, "status": status, "code": code, "field": field})
            if retry_after is not None:
                extra_headers.append((b"retry-after", str(retry_after).encode()))
            return await self.answer(send, status, error_body(status, code, text, field), extra_headers)
        name = f"projects/{project}/messages/{next(self.message_ids)}"
        self.record({**entry, "status": 200, "name": name})
        return await self.answer(send, 200, {"name": name})

    @staticmethod
    async def answer(send, status, body, headers=()):
        payload = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *headers]})
        await send({"type": "http.response.body", "body": payload})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--account-public-key", required=True)
    parser.add_argument("--client-email", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--control")
    parser.add_argument("--token-lifetime", type=int, default=3600)
    parser.add_argument("--droppable", action="store_true", help="serve behind a relay that can cut connections")
    arguments = parser.parse_args()
    with open(arguments.account_public_key) as pem:
        public_key = pem.read()
    config = h2_config(arguments.cert, arguments.key)
    asyncio.run(serve_on(arguments.port, arguments.droppable, config,
                         lambda relay: Simulator(arguments, public_key, relay)))


if __name__ == "__main__":
    main()
