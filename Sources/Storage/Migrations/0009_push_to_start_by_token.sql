-- A push-to-start token belongs to the person who registered it last on that phone: registering it
-- removes every other registration of the same token for the same app (another customer, another
-- merchant), so that nobody else's order starts an activity on that lock screen. This index finds them.
CREATE INDEX push_to_start_by_token ON push_to_start_tokens (bundle_id, push_token);
