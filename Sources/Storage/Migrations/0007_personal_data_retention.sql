-- Personal data does not outlive its use: when an order's customer data (name, phone, address,
-- payment, note, destination, the rider's phone, free-text reasons) was erased, by the retention
-- time after the order ended or on a customer's request. The order's public history stays.
ALTER TABLE orders ADD COLUMN personal_data_erased_at INTEGER;
CREATE INDEX orders_personal_data_due ON orders (updated_at)
    WHERE personal_data_erased_at IS NULL AND status IN ('delivered', 'cancelled');
