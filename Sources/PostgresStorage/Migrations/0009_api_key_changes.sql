-- Every node keeps the API keys it read in memory. A change to a stored key (a revocation through
-- any node or `deliveryd keys revoke`, the admin key replaced at a start) bumps this one number, in
-- the same transaction, and every node empties its key cache when it sees the number move.
CREATE TABLE api_key_changes (
    id         integer PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL
);
INSERT INTO api_key_changes (id, generation) VALUES (1, 0);

CREATE FUNCTION api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE api_key_changes SET generation = generation + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION api_key_changed();
