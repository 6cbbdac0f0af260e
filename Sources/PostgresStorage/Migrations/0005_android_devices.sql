-- SQLite's migration 0011: activities and push-to-start devices reached through FCM (android) as
-- well as APNs (ios); the push log says which service answered.
ALTER TABLE activities ADD COLUMN platform text NOT NULL DEFAULT 'ios' CHECK (platform IN ('ios', 'android'));
ALTER TABLE push_to_start_tokens ADD COLUMN platform text NOT NULL DEFAULT 'ios'
    CHECK (platform IN ('ios', 'android'));
ALTER TABLE push_log ADD COLUMN platform text NOT NULL DEFAULT 'ios';
