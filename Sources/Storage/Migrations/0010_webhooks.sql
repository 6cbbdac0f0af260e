-- Webhooks: merchants' systems told what happened to their orders (Standard Webhooks v1).

-- Where a merchant wants events sent. The signing secrets are sealed with the service's sealing key
-- (the database alone does not let anyone sign); during a rotation the previous one signs too.
CREATE TABLE webhook_endpoints (
    id                         TEXT PRIMARY KEY,
    merchant_id                TEXT NOT NULL,
    url                        TEXT NOT NULL,
    description                TEXT NOT NULL DEFAULT '',
    -- The event types wanted, separated by spaces; empty: every type.
    event_types                TEXT NOT NULL DEFAULT '',
    enabled                    INTEGER NOT NULL DEFAULT 1,
    -- Why deliveryd disabled it (410 Gone, failing for days); NULL when a user did, or it is enabled.
    disabled_reason            TEXT,
    secret_sealed              BLOB NOT NULL,
    previous_secret_sealed     BLOB,
    previous_secret_expires_at INTEGER,
    -- The first failed attempt since the last delivered one; NULL while it delivers.
    failing_since              INTEGER,
    last_delivered_at          INTEGER,
    -- Not sent to before this time: the receiver asked for a pause (429, 502, 504, Retry-After).
    paused_until               INTEGER,
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_by_merchant ON webhook_endpoints (merchant_id);

-- Each event once, its body kept byte for byte so that every attempt signs and sends the same.
CREATE TABLE webhook_events (
    id          TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL,
    type        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    body        BLOB NOT NULL
);
CREATE INDEX webhook_events_by_merchant ON webhook_events (merchant_id, created_at);

-- The outbox of webhooks: one row per event and endpoint, written with the change that caused it.
CREATE TABLE webhook_deliveries (
    id          INTEGER PRIMARY KEY,
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id    TEXT NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state       TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'delivered', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    due_at      INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE state = 'sending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, state);
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_id);

-- The delivery log: every attempt, what the receiver answered and how long it took.
CREATE TABLE webhook_attempts (
    id           INTEGER PRIMARY KEY,
    endpoint_id  TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    attempted_at INTEGER NOT NULL,
    http_status  INTEGER,
    error        TEXT,
    duration_ms  INTEGER NOT NULL
);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (attempted_at);
