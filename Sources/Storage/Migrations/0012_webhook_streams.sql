-- Webhooks without a row per event and endpoint: each endpoint reads its merchant's events past a
-- cursor, in the order they were written, and only an attempt that failed gets a row in
-- webhook_deliveries (its retries), as do replays. A status change then writes its event and
-- nothing else for webhooks.

-- The order events are read in: (txid, seq). SQLite has one writer, so events commit in the order
-- they are written and txid is always 0; seq counts a merchant's events from 1. (PostgreSQL's
-- migration fills txid with the writing transaction's id, see its 0006.)
ALTER TABLE webhook_events ADD COLUMN txid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_events SET seq = rowid;
CREATE INDEX webhook_events_stream ON webhook_events (merchant_id, txid, seq);

-- How far an endpoint has read its merchant's events: every event up to here was delivered, or
-- failed and has a row in webhook_deliveries. The events already there were queued as rows.
-- A dispatcher reads an endpoint's events only while it holds the endpoint's stream lease.
ALTER TABLE webhook_endpoints ADD COLUMN cursor_txid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN cursor_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN stream_owner TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN stream_lease_until INTEGER;
UPDATE webhook_endpoints SET cursor_seq = coalesce(
    (SELECT max(seq) FROM webhook_events AS ev WHERE ev.merchant_id = webhook_endpoints.merchant_id), 0);

-- Deliveries delivered since the endpoint was made: a delivered event leaves no row to count.
ALTER TABLE webhook_endpoints ADD COLUMN delivered_count INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_endpoints SET delivered_count = (SELECT count(*) FROM webhook_deliveries AS d
    WHERE d.endpoint_id = webhook_endpoints.id AND d.state = 'delivered');
