-- deliveryd's schema on PostgreSQL: the SQLite schema as of its migration 0008, in PostgreSQL's types
-- (SQLite's later migrations follow here as 0002 and on).
-- Times are milliseconds since 1970 (bigint), as on SQLite, so that both backends share their rows'
-- meaning; money is not stored; coordinates are double precision.

CREATE TABLE orders (
    id                      text PRIMARY KEY,
    merchant_id             text NOT NULL,
    number                  text NOT NULL,
    merchant_name           text NOT NULL,
    items_json              text NOT NULL,
    customer_id             text NOT NULL,
    customer_name           text NOT NULL,
    customer_phone          text NOT NULL,
    customer_locale         text NOT NULL,
    address                 text NOT NULL,
    payment_method          text NOT NULL,
    payment_brand           text,
    payment_last4           text,
    note                    text,
    status                  text NOT NULL
        CHECK (status IN ('placed', 'preparing', 'pickup', 'delivering', 'delivered', 'cancelled')),
    cancelled_at_status     text,
    estimated_arrival       bigint NOT NULL,
    rider_id                text,
    rider_name              text,
    rider_phone             text,
    tracking_token_hash     text,
    created_at              bigint NOT NULL,
    updated_at              bigint NOT NULL,
    destination_latitude    double precision,
    destination_longitude   double precision,
    ride_position_at        bigint,
    ride_remaining_m        double precision,
    ride_initial_m          double precision,
    ride_eta                bigint,
    personal_data_erased_at bigint,
    UNIQUE (merchant_id, number)
);
CREATE INDEX orders_by_status ON orders (status, updated_at);
CREATE UNIQUE INDEX orders_by_tracking_token ON orders (tracking_token_hash) WHERE tracking_token_hash IS NOT NULL;
CREATE INDEX orders_by_number ON orders (number);
CREATE INDEX orders_personal_data_due ON orders (updated_at)
    WHERE personal_data_erased_at IS NULL AND status IN ('delivered', 'cancelled');
CREATE INDEX orders_by_merchant_rider ON orders (merchant_id, rider_id) WHERE rider_id IS NOT NULL;

CREATE TABLE order_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    text NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    kind        text NOT NULL,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    actor       text NOT NULL,
    at          bigint NOT NULL,
    reason      text,
    request_id  text
);
CREATE INDEX order_events_by_order ON order_events (order_id, id);

CREATE TABLE activities (
    order_id              text NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    activity_id           text NOT NULL,
    push_token            text NOT NULL,
    environment           text NOT NULL CHECK (environment IN ('development', 'production')),
    bundle_id             text NOT NULL,
    started_at            bigint NOT NULL,
    registered_at         bigint NOT NULL,
    ended_at              bigint,
    ended_reason          text,
    last_sent_status      text,
    last_sent_fingerprint text,
    last_sent_timestamp   bigint,
    PRIMARY KEY (order_id, activity_id)
);
CREATE INDEX activities_by_token ON activities (push_token);
CREATE INDEX activities_ended ON activities (ended_at) WHERE ended_at IS NOT NULL;

CREATE TABLE outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    text NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    event_id    bigint REFERENCES order_events (id) ON DELETE SET NULL,
    kind        text NOT NULL CHECK (kind IN ('activity', 'start')),
    target_id   text NOT NULL,
    state       text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'sending', 'sent', 'dead', 'superseded')),
    due_at      bigint NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until bigint,
    last_error  text,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL,
    request_id  text
);
CREATE INDEX outbox_due ON outbox (due_at) WHERE state = 'pending';
CREATE INDEX outbox_leased ON outbox (lease_until) WHERE state = 'sending';
CREATE INDEX outbox_open_by_target ON outbox (order_id, kind, target_id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_closed ON outbox (updated_at) WHERE state IN ('sent', 'superseded');
CREATE INDEX outbox_dead ON outbox (updated_at) WHERE state = 'dead';

CREATE TABLE push_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id      text NOT NULL,
    target_id     text NOT NULL,
    event         text NOT NULL,
    priority      integer NOT NULL,
    http_status   integer,
    reason        text,
    apns_id       text,
    latency_ms    integer,
    attempted_at  bigint NOT NULL,
    request_id    text,
    content_state text
);
CREATE INDEX push_log_by_order ON push_log (order_id, id);
CREATE INDEX push_log_by_time ON push_log (attempted_at);

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    key_hash    text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('merchant', 'rider', 'admin')),
    merchant_id text,
    rider_id    text,
    created_at  bigint NOT NULL,
    revoked_at  bigint
);

CREATE TABLE idempotency_keys (
    principal     text NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    response_code integer NOT NULL,
    response_body bytea NOT NULL,
    expires_at    bigint NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

CREATE TABLE customer_credentials (
    id          text PRIMARY KEY,
    key_hash    text NOT NULL UNIQUE,
    merchant_id text NOT NULL,
    customer_id text NOT NULL,
    created_at  bigint NOT NULL,
    revoked_at  bigint
);
CREATE INDEX customer_credentials_by_customer ON customer_credentials (merchant_id, customer_id);

CREATE TABLE push_to_start_tokens (
    merchant_id   text NOT NULL,
    customer_id   text NOT NULL,
    device_id     text NOT NULL,
    credential_id text NOT NULL,
    push_token    text NOT NULL,
    environment   text NOT NULL CHECK (environment IN ('development', 'production')),
    bundle_id     text NOT NULL,
    registered_at bigint NOT NULL,
    PRIMARY KEY (merchant_id, customer_id, device_id)
);
CREATE INDEX push_to_start_by_credential ON push_to_start_tokens (credential_id);
