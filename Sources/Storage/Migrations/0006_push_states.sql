-- Support staff answering a customer need to see what each push showed on the phone: the public
-- Live Activity state it carried (the projection, which holds no phone, address or payment), kept
-- with the attempt. Orders are found by their number as well as by id.
ALTER TABLE push_log ADD COLUMN content_state TEXT;
CREATE INDEX orders_by_number ON orders (number);
