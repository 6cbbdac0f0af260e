-- The HTTP request id behind each change, so that a log line of a push leads back to the request
-- (and its access-log line) that caused it.
ALTER TABLE order_events ADD COLUMN request_id TEXT;
ALTER TABLE outbox ADD COLUMN request_id TEXT;
ALTER TABLE push_log ADD COLUMN request_id TEXT;
