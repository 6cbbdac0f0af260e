-- Replays of idempotent requests are now sealed with a key kept outside the database, and written
-- in the same transaction as the change they record. The replays kept so far are in clear (a
-- tracking token, a customer's phone and address): they are dropped. A client that retries one of
-- those requests within its 24 hours gets it run again, which every write of the API allows (a
-- repeated status is `unchanged`, a repeated order number returns the first order).
DELETE FROM idempotency_keys;
