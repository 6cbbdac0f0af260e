-- Push-to-start devices belong to one merchant's customer, and the customer's app registers them
-- with a credential of its own. Before this, devices were kept under the customer id alone and any
-- merchant key could register them, so merchant B's order for customer "c-42" started an activity on
-- the phone that merchant A had registered as "c-42". Those rows cannot be given a merchant after
-- the fact: they are dropped, and each app registers its device again at its next launch (iOS hands
-- the app its push-to-start token through pushToStartTokenUpdates every time it starts).

-- Credentials a merchant's backend mints for one of its customers and hands to that customer's app
-- (stored as SHA-256 of the credential, never the credential).
CREATE TABLE customer_credentials (
    id          TEXT PRIMARY KEY,
    key_hash    TEXT NOT NULL UNIQUE,
    merchant_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX customer_credentials_by_customer ON customer_credentials (merchant_id, customer_id);

DROP TABLE push_to_start_tokens;
CREATE TABLE push_to_start_tokens (
    merchant_id   TEXT NOT NULL,
    customer_id   TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    credential_id TEXT NOT NULL,
    push_token    TEXT NOT NULL,
    environment   TEXT NOT NULL CHECK (environment IN ('development', 'production')),
    bundle_id     TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, customer_id, device_id)
);
CREATE INDEX push_to_start_by_credential ON push_to_start_tokens (credential_id);

-- Start pushes queued for the old rows have no device to go to any more.
UPDATE outbox SET state = 'superseded' WHERE kind = 'start' AND state IN ('pending', 'sending');
