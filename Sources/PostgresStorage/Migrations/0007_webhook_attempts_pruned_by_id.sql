-- The delivery log is pruned in the order it was written (by id, see the retention pass) rather
-- than through an index on the time of each attempt: a delivered event writes one log row, in the
-- dispatcher's transaction, and the index was a second B-tree change for each of them.
DROP INDEX webhook_attempts_by_time;
