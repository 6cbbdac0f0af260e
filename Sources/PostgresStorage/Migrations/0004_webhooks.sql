-- SQLite's migration 0010: webhook endpoints, events, their outbox and the delivery log.
CREATE TABLE webhook_endpoints (
    id                         text PRIMARY KEY,
    merchant_id                text NOT NULL,
    url                        text NOT NULL,
    description                text NOT NULL DEFAULT '',
    event_types                text NOT NULL DEFAULT '',
    enabled                    integer NOT NULL DEFAULT 1,
    disabled_reason            text,
    secret_sealed              bytea NOT NULL,
    previous_secret_sealed     bytea,
    previous_secret_expires_at bigint,
    failing_since              bigint,
    last_delivered_at          bigint,
    paused_until               bigint,
    created_at                 bigint NOT NULL,
    updated_at                 bigint NOT NULL
);
CREATE INDEX webhook_endpoints_by_merchant ON webhook_endpoints (merchant_id);

CREATE TABLE webhook_events (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL,
    type        text NOT NULL,
    created_at  bigint NOT NULL,
    body        bytea NOT NULL
);
CREATE INDEX webhook_events_by_merchant ON webhook_events (merchant_id, created_at);

CREATE TABLE webhook_deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id    text NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state       text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'delivered', 'failed')),
    attempts    integer NOT NULL DEFAULT 0,
    due_at      bigint NOT NULL,
    lease_owner text,
    lease_until bigint,
    last_error  text,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE state = 'sending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, state);
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id  text NOT NULL,
    event_id     text NOT NULL,
    attempt      integer NOT NULL,
    attempted_at bigint NOT NULL,
    http_status  integer,
    error        text,
    duration_ms  integer NOT NULL
);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (attempted_at);
