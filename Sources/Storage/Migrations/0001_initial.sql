-- deliveryd schema, version 1. Times are integer milliseconds since 1970-01-01 UTC.

CREATE TABLE orders (
    id                  TEXT PRIMARY KEY,
    merchant_id         TEXT NOT NULL,
    number              TEXT NOT NULL,
    merchant_name       TEXT NOT NULL,
    items_json          TEXT NOT NULL,
    customer_id         TEXT NOT NULL,
    customer_name       TEXT NOT NULL,
    customer_phone      TEXT NOT NULL,
    customer_locale     TEXT NOT NULL,
    address             TEXT NOT NULL,
    payment_method      TEXT NOT NULL,
    payment_brand       TEXT,
    payment_last4       TEXT,
    note                TEXT,
    status              TEXT NOT NULL
        CHECK (status IN ('placed', 'preparing', 'pickup', 'delivering', 'delivered', 'cancelled')),
    cancelled_at_status TEXT,
    estimated_arrival   INTEGER NOT NULL,
    rider_id            TEXT,
    rider_name          TEXT,
    rider_phone         TEXT,
    tracking_token_hash TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (merchant_id, number)
);
CREATE INDEX orders_by_rider ON orders (rider_id) WHERE rider_id IS NOT NULL;
CREATE INDEX orders_by_status ON orders (status, updated_at);
CREATE UNIQUE INDEX orders_by_tracking_token ON orders (tracking_token_hash) WHERE tracking_token_hash IS NOT NULL;

-- The history of an order: one row per applied change, never rewritten.
CREATE TABLE order_events (
    id          INTEGER PRIMARY KEY,
    order_id    TEXT NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    from_status TEXT NOT NULL,
    to_status   TEXT NOT NULL,
    actor       TEXT NOT NULL,
    at          INTEGER NOT NULL,
    reason      TEXT
);
CREATE INDEX order_events_by_order ON order_events (order_id, id);

-- One row per Live Activity of an order; registered_at is when its current token was registered.
CREATE TABLE activities (
    order_id              TEXT NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    activity_id           TEXT NOT NULL,
    push_token            TEXT NOT NULL,
    environment           TEXT NOT NULL CHECK (environment IN ('development', 'production')),
    bundle_id             TEXT NOT NULL,
    started_at            INTEGER NOT NULL,
    registered_at         INTEGER NOT NULL,
    ended_at              INTEGER,
    ended_reason          TEXT,
    last_sent_status      TEXT,
    last_sent_fingerprint TEXT,
    last_sent_timestamp   INTEGER,
    PRIMARY KEY (order_id, activity_id)
);
CREATE INDEX activities_by_token ON activities (push_token);
CREATE INDEX activities_ended ON activities (ended_at) WHERE ended_at IS NOT NULL;

-- Push-to-start tokens of a customer's devices, used to start an activity when an order is created.
CREATE TABLE push_to_start_tokens (
    customer_id   TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    push_token    TEXT NOT NULL,
    environment   TEXT NOT NULL CHECK (environment IN ('development', 'production')),
    bundle_id     TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (customer_id, device_id)
);

-- Pushes decided but not yet delivered. A row names what to push to; the payload is built from the
-- order's latest state when it is sent, so pending rows of one activity coalesce to the newest.
-- state: pending → sending (leased) → sent | dead; superseded when a newer row replaced it.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY,
    order_id    TEXT NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    event_id    INTEGER REFERENCES order_events (id) ON DELETE SET NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('activity', 'start')),
    target_id   TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'sending', 'sent', 'dead', 'superseded')),
    due_at      INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until INTEGER,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX outbox_due ON outbox (due_at) WHERE state = 'pending';
CREATE INDEX outbox_leased ON outbox (lease_until) WHERE state = 'sending';
CREATE INDEX outbox_open_by_target ON outbox (order_id, kind, target_id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_closed ON outbox (updated_at) WHERE state IN ('sent', 'superseded');
CREATE INDEX outbox_dead ON outbox (updated_at) WHERE state = 'dead';

-- Every attempt to reach APNs.
CREATE TABLE push_log (
    id           INTEGER PRIMARY KEY,
    order_id     TEXT NOT NULL,
    target_id    TEXT NOT NULL,
    event        TEXT NOT NULL,
    priority     INTEGER NOT NULL,
    http_status  INTEGER,
    reason       TEXT,
    apns_id      TEXT,
    latency_ms   INTEGER,
    attempted_at INTEGER NOT NULL
);
CREATE INDEX push_log_by_order ON push_log (order_id, id);
CREATE INDEX push_log_by_time ON push_log (attempted_at);

-- API keys, stored as SHA-256 hashes of the key.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    key_hash    TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('merchant', 'rider', 'admin')),
    merchant_id TEXT,
    rider_id    TEXT,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

-- Replays of idempotent writes: the same key and request hash give the stored response.
CREATE TABLE idempotency_keys (
    principal     TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    response_code INTEGER NOT NULL,
    response_body BLOB NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
