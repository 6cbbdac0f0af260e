-- Every position a rider posts reads the rider's open orders. The index held every order the rider
-- ever carried, delivered ones too, so a rider with a long history read them all and sorted what
-- was left; it now holds only open orders, in the order they are read.
DROP INDEX orders_by_merchant_rider;
CREATE INDEX orders_open_by_rider ON orders (merchant_id, rider_id, created_at, id)
    WHERE rider_id IS NOT NULL AND status NOT IN ('delivered', 'cancelled');
