-- The rider coming closer. An order may carry its destination's coordinates (private, like the
-- address), and keeps what the rider's positions tell of the ride: when the newest position used
-- was taken, the remaining distance, the distance when the ride started (for the progress) and the
-- ETA from the rider's speed. The positions themselves are never stored.
ALTER TABLE orders ADD COLUMN destination_latitude REAL;
ALTER TABLE orders ADD COLUMN destination_longitude REAL;
ALTER TABLE orders ADD COLUMN ride_position_at INTEGER;
ALTER TABLE orders ADD COLUMN ride_remaining_m REAL;
ALTER TABLE orders ADD COLUMN ride_initial_m REAL;
ALTER TABLE orders ADD COLUMN ride_eta INTEGER;
