-- outbox_release (admin): gives a quarantined event back to the relay once its cause is fixed
-- (a larger message.max.bytes on the broker, a relay that can route it). The relay tries it
-- again at its next step; an event that still cannot be published is quarantined again, with
-- the reason of that attempt. Outcomes: released | not_quarantined (published, or never set
-- aside) | not_found. 22023 for a NULL id.
CREATE OR REPLACE FUNCTION ordergate.outbox_release(p_id bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('outbox_release: p_id is required');
    END IF;
    UPDATE outbox b SET quarantined_at = NULL, quarantine_reason = NULL
     WHERE b.id = p_id AND b.quarantined_at IS NOT NULL;
    IF FOUND THEN
        RETURN 'released';
    END IF;
    IF EXISTS (SELECT 1 FROM outbox b WHERE b.id = p_id) THEN
        RETURN 'not_quarantined';
    END IF;
    RETURN 'not_found';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_release(bigint) TO ordergate_admin;
