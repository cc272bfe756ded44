-- outbox_quarantine_list: the quarantined events, oldest first (ordergatectl outbox quarantined),
-- with their reason; at most p_limit (1..10000) rows. due_at: a cancel_scheduled's due time as
-- written (text: it may be the very value that could not be carried), else NULL.
CREATE OR REPLACE FUNCTION ordergate.outbox_quarantine_list(p_limit int DEFAULT 100)
RETURNS TABLE (id bigint, event_type text, order_no text, created_at timestamptz,
               quarantined_at timestamptz, reason text, due_at text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('outbox_quarantine_list: p_limit must be 1..10000');
    END IF;
    RETURN QUERY
    SELECT b.id, b.event_type, b.order_no::text, b.created_at, b.quarantined_at,
           b.quarantine_reason,
           CASE WHEN b.event_type = 'cancel_scheduled' THEN b.payload ->> 'due_at' END
      FROM outbox b
     WHERE b.quarantined_at IS NOT NULL
     ORDER BY b.id
     LIMIT p_limit;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_quarantine_list(int) TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_quarantine_list(integer) IS
    'The quarantined events, oldest first, with their reason';
