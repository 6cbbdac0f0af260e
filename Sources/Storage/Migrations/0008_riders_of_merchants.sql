-- Riders belong to merchants. A rider id is the merchant's own name for one of its riders, so a
-- merchant that names a rider of another merchant reaches nobody: rider keys carry their merchant,
-- and a rider sees, and moves with its positions, only its merchant's orders.
--
-- A rider key made before this keeps working when exactly one merchant ever assigned its rider id;
-- any other is refused until an admin issues a new one with its merchant.
UPDATE api_keys
SET merchant_id = (
    SELECT min(orders.merchant_id) FROM orders WHERE orders.rider_id = api_keys.rider_id
)
WHERE role = 'rider' AND merchant_id IS NULL
  AND (SELECT count(DISTINCT orders.merchant_id) FROM orders WHERE orders.rider_id = api_keys.rider_id) = 1;

DROP INDEX orders_by_rider;
CREATE INDEX orders_by_merchant_rider ON orders (merchant_id, rider_id) WHERE rider_id IS NOT NULL;
