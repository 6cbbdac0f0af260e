-- Wakes the pushers of every node as soon as a push is queued, wherever it was queued: a
-- notification on the channel deliveryd_outbox, sent at commit, once per transaction however many
-- rows it inserted (PostgreSQL folds equal notifications of one transaction into one).
CREATE FUNCTION deliveryd_outbox_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('deliveryd_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_queued AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION deliveryd_outbox_queued();
