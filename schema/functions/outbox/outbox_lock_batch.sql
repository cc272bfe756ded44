-- Outbox relay. The relay opens a transaction, outbox_lock_batch (rows stay locked, SKIP LOCKED
-- lets several relays share the work), publishes, waits for the broker's acknowledgement,
-- outbox_mark_published, commits. A crash before the commit publishes again: at least once.
-- Quarantined events (outbox_quarantine) are skipped: one the relay can never publish never
-- holds back the events behind it.
CREATE OR REPLACE FUNCTION ordergate.outbox_lock_batch(p_limit int)
RETURNS TABLE (id bigint, event_type text, order_no text, payload text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('outbox_lock_batch: p_limit must be 1..10000');
    END IF;
    RETURN QUERY
    SELECT b.id, b.event_type, b.order_no, b.payload::text
      FROM outbox b
     WHERE b.published_at IS NULL
       AND b.quarantined_at IS NULL
     ORDER BY b.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_lock_batch(int) TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_lock_batch(integer) IS
    'Locks the relay''s next batch of unpublished events, oldest first, skipping locked ones';
