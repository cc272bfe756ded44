-- outbox_quarantine: the relay sets aside an event it can never publish as it is (its cancel
-- message cannot carry the due time, the broker refuses its size), with the reason, inside the
-- relay's transaction that holds the row (outbox_lock_batch). A quarantined event is skipped by
-- outbox_lock_batch, so nothing behind it waits; it stays unpublished until outbox_release.
-- Returns 1 when the row was set aside, 0 when it is published, quarantined already or gone.
-- The reason keeps its first 1000 characters. 22023 for a NULL id or an empty reason.
CREATE OR REPLACE FUNCTION ordergate.outbox_quarantine(p_id bigint, p_reason text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_n bigint;
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('outbox_quarantine: p_id is required');
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        PERFORM _bad_arg('outbox_quarantine: p_reason is required');
    END IF;
    UPDATE outbox b
       SET quarantined_at = clock_timestamp(), quarantine_reason = left(p_reason, 1000)
     WHERE b.id = p_id AND b.published_at IS NULL AND b.quarantined_at IS NULL;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_quarantine(bigint,text) TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_quarantine(bigint,text) IS
    'Sets aside an event the relay can never publish as it is, with the reason';
