-- Android phones beside iPhones: an activity or push-to-start device is reached through APNs (ios)
-- or through FCM (android). An Android row keeps its FCM registration token in push_token and its
-- app's Firebase project in bundle_id; its environment is always 'production' (FCM has one).
-- Each push in the log says which service answered it.
ALTER TABLE activities ADD COLUMN platform TEXT NOT NULL DEFAULT 'ios' CHECK (platform IN ('ios', 'android'));
ALTER TABLE push_to_start_tokens ADD COLUMN platform TEXT NOT NULL DEFAULT 'ios'
    CHECK (platform IN ('ios', 'android'));
ALTER TABLE push_log ADD COLUMN platform TEXT NOT NULL DEFAULT 'ios';
