"""The benchmark's peer: deliveryd's order API done the plain way in Python, to compare against.

uvicorn + starlette + sqlite3, with deliveryd's SQLite settings (WAL, synchronous=FULL, foreign keys)
and the same write path: a status change updates the order, appends its event and queues one outbox
row per live activity in one transaction; a thread drains the outbox to APNs over HTTP/2 (httpx).
Routes (a subset of deliveryd's, same shapes):
    POST /v1/orders                             merchant key      → 201 {"order", "trackingToken"}
    PUT  /v1/orders/{id}/activities/{aid}       tracking token    → 200
    PUT  /v1/orders/{id}/rider                  merchant key      → 200
    POST /v1/orders/{id}/status                 merchant or rider key → 200 {"order", "transition"}
    GET  /v1/orders/{id}                        tracking token    → 200 public view
Settings come from the environment: PEER_DB, PEER_MERCHANT_KEY, PEER_RIDER_KEY, PEER_APNS_URL, PEER_APNS_CA,
PEER_SYNCHRONOUS (FULL, the default, or NORMAL) and PEER_SENDER (apns, the default, or log: each push
is one JSON line on standard error instead of a request, as deliveryd's log sender does).
Keys are compared, not looked up, and the rider's ownership of an order is not checked: the peer is
minimal on purpose, so the comparison flatters it.
"""
import contextlib
import hashlib
import json
import os
import secrets
import sys
import sqlite3
import threading
import time

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DB_PATH = os.environ["PEER_DB"]
MERCHANT_KEY = os.environ["PEER_MERCHANT_KEY"]
RIDER_KEY = os.environ["PEER_RIDER_KEY"]
APNS_URL = os.environ.get("PEER_APNS_URL")
APNS_CA = os.environ.get("PEER_APNS_CA")
SYNCHRONOUS = os.environ.get("PEER_SYNCHRONOUS", "FULL")
SENDER = os.environ.get("PEER_SENDER", "apns")
NEXT = {"placed": {"preparing", "cancelled"}, "preparing": {"pickup", "cancelled"},
        "pickup": {"delivering", "cancelled"}, "delivering": {"delivered", "cancelled"}}

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, number TEXT NOT NULL,
    merchant_name TEXT NOT NULL, items_json TEXT NOT NULL, customer_json TEXT NOT NULL, address TEXT NOT NULL,
    status TEXT NOT NULL, estimated_arrival TEXT, rider_id TEXT, rider_name TEXT, tracking_token_hash TEXT UNIQUE, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, UNIQUE (merchant_id, number));
CREATE TABLE IF NOT EXISTS order_events (id INTEGER PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders (id),
    from_status TEXT NOT NULL, to_status TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS order_events_by_order ON order_events (order_id, id);
CREATE TABLE IF NOT EXISTS activities (order_id TEXT NOT NULL REFERENCES orders (id), activity_id TEXT NOT NULL,
    push_token TEXT NOT NULL, environment TEXT NOT NULL, PRIMARY KEY (order_id, activity_id));
CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, order_id TEXT NOT NULL, activity_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', created_at INTEGER NOT NULL, sent_at INTEGER);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (id) WHERE state = 'pending';
"""


def connect():
    connection = sqlite3.connect(DB_PATH, isolation_level=None, check_same_thread=False, timeout=10)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute("PRAGMA busy_timeout=10000")
    return connection


writer = connect()
writer.executescript(SCHEMA)
write_lock = threading.Lock()
readers = threading.local()
outbox_ready = threading.Event()


class Refused(Exception):
    """Ends a write transaction with a rollback and this answer."""

    def __init__(self, response):
        super().__init__()
        self.response = response


@contextlib.contextmanager
def write_transaction():
    """One write transaction on the one write connection: committed if the block ends, else rolled back."""
    with write_lock:
        writer.execute("BEGIN IMMEDIATE")
        try:
            yield writer
        except BaseException:
            writer.execute("ROLLBACK")
            raise
        writer.execute("COMMIT")


def reader():
    if not hasattr(readers, "connection"):
        readers.connection = connect()
    return readers.connection


def now_ms():
    return int(time.time() * 1000)


def error(status, code, message):
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def bearer(request):
    header = request.headers.get("authorization", "")
    return header[7:] if header.startswith("Bearer ") else None


def public_view(row):
    return {"id": row[0], "number": row[1], "merchantName": row[2], "status": row[3], "estimatedArrival": row[4]}


def create_order(request):
    if bearer(request) != MERCHANT_KEY:
        return error(401, "unauthorized", "a merchant key is required")
    try:
        body = json.loads(request.state.body)
        number, name, items = body["number"], body["merchantName"], body["items"]
        customer, address = body["customer"], body["address"]
    except (ValueError, KeyError, TypeError):
        return error(422, "validation_failed", "number, merchantName, items, customer and address are required")
    order_id = "o_" + secrets.token_hex(8)
    token = "dt_" + secrets.token_hex(32)
    stamp = now_ms()
    try:
        with write_transaction() as connection:
            connection.execute(
                "INSERT INTO orders VALUES (?, 'm-1', ?, ?, ?, ?, ?, 'placed', ?, NULL, NULL, ?, ?, ?)",
                (order_id, number, name, json.dumps(items), json.dumps(customer), address,
                 body.get("estimatedArrival"), hashlib.sha256(token.encode()).hexdigest(), stamp, stamp))
    except sqlite3.IntegrityError:
        return error(409, "conflict", "an order with this number exists")
    return JSONResponse({"order": {"id": order_id, "status": "placed"}, "trackingToken": token}, status_code=201)


def order_for_token(order_id, token):
    if not token:
        return None
    return reader().execute(
        "SELECT id, number, merchant_name, status, estimated_arrival FROM orders WHERE id = ? AND tracking_token_hash = ?",
        (order_id, hashlib.sha256(token.encode()).hexdigest())).fetchone()


def register_activity(request):
    order_id, activity_id = request.path_params["id"], request.path_params["aid"]
    if order_for_token(order_id, bearer(request)) is None:
        return error(401, "unauthorized", "the order's tracking token is required")
    try:
        body = json.loads(request.state.body)
        push_token, environment = body["pushToken"], body["environment"]
    except (ValueError, KeyError, TypeError):
        return error(422, "validation_failed", "pushToken and environment are required")
    with write_transaction() as connection:
        connection.execute("INSERT OR REPLACE INTO activities VALUES (?, ?, ?, ?)",
                           (order_id, activity_id, push_token, environment))
    return JSONResponse({"activity": {"id": activity_id}})


def queue_pushes(order_id, stamp):
    for (activity_id,) in writer.execute("SELECT activity_id FROM activities WHERE order_id = ?", (order_id,)).fetchall():
        writer.execute("INSERT INTO outbox (order_id, activity_id, created_at) VALUES (?, ?, ?)",
                       (order_id, activity_id, stamp))


def assign_rider(request):
    if bearer(request) != MERCHANT_KEY:
        return error(401, "unauthorized", "a merchant key is required")
    order_id = request.path_params["id"]
    try:
        body = json.loads(request.state.body)
        rider_id, name = body["riderId"], body["name"]
    except (ValueError, KeyError, TypeError):
        return error(422, "validation_failed", "riderId and name are required")
    stamp = now_ms()
    try:
        with write_transaction() as connection:
            changed = connection.execute(
                "UPDATE orders SET rider_id = ?, rider_name = ?, updated_at = ? WHERE id = ?",
                (rider_id, name, stamp, order_id)).rowcount
            if not changed:
                raise Refused(error(404, "not_found", "order not found"))
            queue_pushes(order_id, stamp)
    except Refused as refused:
        return refused.response
    outbox_ready.set()
    return JSONResponse({"order": {"id": order_id}, "transition": "applied"})


def change_status(request):
    if bearer(request) not in (MERCHANT_KEY, RIDER_KEY):
        return error(401, "unauthorized", "a merchant or rider key is required")
    order_id = request.path_params["id"]
    try:
        status = json.loads(request.state.body)["status"]
    except (ValueError, KeyError, TypeError):
        return error(422, "validation_failed", "status is required")
    stamp = now_ms()
    try:
        with write_transaction() as connection:
            row = connection.execute("SELECT status FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                raise Refused(error(404, "not_found", "order not found"))
            current = row[0]
            if status == current:
                raise Refused(JSONResponse({"order": {"id": order_id, "status": current}, "transition": "unchanged"}))
            if status not in NEXT.get(current, set()):
                raise Refused(error(409, "invalid_transition", f"cannot go from {current} to {status}"))
            connection.execute("UPDATE orders SET status = ?, updated_at = ? WHERE id = ?", (status, stamp, order_id))
            connection.execute("INSERT INTO order_events (order_id, from_status, to_status, at) VALUES (?, ?, ?, ?)",
                               (order_id, current, status, stamp))
            queue_pushes(order_id, stamp)
    except Refused as refused:
        return refused.response
    outbox_ready.set()
    return JSONResponse({"order": {"id": order_id, "status": status}, "transition": "applied"})


def read_order(request):
    row = order_for_token(request.path_params["id"], bearer(request))
    if row is None:
        return error(401, "unauthorized", "the order's tracking token is required")
    return JSONResponse({"order": public_view(row)})


def pusher():
    """Drains the outbox in batches: one HTTP/2 request per row, the latest state of its order."""
    client = httpx.Client(http2=True, verify=APNS_CA, timeout=10) if SENDER == "apns" else None
    connection = connect()
    while True:
        outbox_ready.wait(1)
        outbox_ready.clear()
        while True:
            rows = connection.execute(
                """SELECT o.id, o.order_id, a.push_token, r.status FROM outbox o
                   JOIN activities a ON a.order_id = o.order_id AND a.activity_id = o.activity_id
                   JOIN orders r ON r.id = o.order_id WHERE o.state = 'pending' ORDER BY o.id LIMIT 200""").fetchall()
            if not rows:
                break
            sent = []
            for outbox_id, order_id, push_token, status in rows:
                payload = {"aps": {"timestamp": int(time.time()), "event": "update",
                                   "content-state": {"status": status}}}
                if client is None:
                    sys.stderr.write(json.dumps({
                        "level": "info", "message": "push.not_delivered", "apns.priority": 10,
                        "device.token.prefix": push_token[:8], "payload": json.dumps(payload)}, sort_keys=True) + "\n")
                else:
                    client.post(f"{APNS_URL}/3/device/{push_token}", json=payload, headers={
                        "apns-push-type": "liveactivity", "apns-topic": "com.example.app.push-type.liveactivity",
                        "apns-priority": "10"})
                sent.append((now_ms(), outbox_id))
            with write_transaction() as connection:
                connection.executemany("UPDATE outbox SET state = 'sent', sent_at = ? WHERE id = ?", sent)


def read_body(endpoint):
    """Reads the request body, then runs the (synchronous, blocking) endpoint in the thread pool."""

    async def wrapped(request):
        request.state.body = await request.body()
        return await run_in_threadpool(endpoint, request)

    return wrapped


def healthz(request):
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(routes=[
    Route("/healthz", healthz),
    Route("/v1/orders", read_body(create_order), methods=["POST"]),
    Route("/v1/orders/{id}", read_body(read_order), methods=["GET"]),
    Route("/v1/orders/{id}/status", read_body(change_status), methods=["POST"]),
    Route("/v1/orders/{id}/activities/{aid}", read_body(register_activity), methods=["PUT"]),
    Route("/v1/orders/{id}/rider", read_body(assign_rider), methods=["PUT"]),
])

if APNS_URL:
    threading.Thread(target=pusher, daemon=True).start()
