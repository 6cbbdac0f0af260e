-- SQLite's migration 0009: a push-to-start token belongs to the person who registered it last.
CREATE INDEX push_to_start_by_token ON push_to_start_tokens (bundle_id, push_token);
