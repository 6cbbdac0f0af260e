-- SQLite's migration 0012: each endpoint reads its merchant's events past a cursor; only failed
-- attempts (retries) and replays get rows in webhook_deliveries.
--
-- Nodes write events beside each other, so an event's place in the order must be one no event
-- committed later can come before: events are read in (txid, seq) order, txid being the writing
-- transaction's id, and only those of transactions older than every one still running
-- (pg_snapshot_xmin), which can no longer be joined by an earlier one.
CREATE SEQUENCE webhook_event_seq;
ALTER TABLE webhook_events ADD COLUMN txid bigint NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN seq bigint NOT NULL DEFAULT 0;
UPDATE webhook_events SET seq = ordered.n
FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM webhook_events) AS ordered
WHERE ordered.id = webhook_events.id;
SELECT setval('webhook_event_seq', coalesce((SELECT max(seq) FROM webhook_events), 0) + 1, false);
ALTER TABLE webhook_events ALTER COLUMN txid SET DEFAULT (pg_current_xact_id()::text::bigint);
ALTER TABLE webhook_events ALTER COLUMN seq SET DEFAULT nextval('webhook_event_seq');
CREATE INDEX webhook_events_stream ON webhook_events (merchant_id, txid, seq);

ALTER TABLE webhook_endpoints ADD COLUMN cursor_txid bigint NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN cursor_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN stream_owner text;
ALTER TABLE webhook_endpoints ADD COLUMN stream_lease_until bigint;
UPDATE webhook_endpoints SET cursor_seq = coalesce(
    (SELECT max(seq) FROM webhook_events AS ev WHERE ev.merchant_id = webhook_endpoints.merchant_id), 0);

-- Deliveries delivered since the endpoint was made: a delivered event leaves no row to count.
ALTER TABLE webhook_endpoints ADD COLUMN delivered_count bigint NOT NULL DEFAULT 0;
UPDATE webhook_endpoints SET delivered_count = (SELECT count(*) FROM webhook_deliveries AS d
    WHERE d.endpoint_id = webhook_endpoints.id AND d.state = 'delivered');
