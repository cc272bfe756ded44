-- console_exceptions: one page of the exception queue, newest first, in keyset order
-- (created_at, id): the next page starts below the last row's (created_at, id), given back as
-- p_before_at, p_before_id, so a page costs the same on the first and the thousandth (no OFFSET,
-- no count). p_state: open (exceptions_open_idx), resolved, refunded or all
-- (exceptions_created_idx). Filters, each NULL for none: p_kind (one kind), p_min_age_s (created
-- at least this many seconds ago), p_min_amount (amount_cents at least), p_channel (the
-- payment's channel). p_limit 1..500. channel: the payment's; refund_pending: an approved refund
-- (resolution auto_refund) still waits for its result. created_at is full precision, the cursor.
CREATE OR REPLACE FUNCTION ordergate.console_exceptions(p_state text, p_kind text, p_min_age_s bigint,
                                                        p_min_amount bigint, p_channel text,
                                                        p_before_at timestamptz,
                                                        p_before_id bigint, p_limit int)
RETURNS TABLE (id bigint, order_no text, kind text, txn_no text, amount_cents bigint,
               currency text, channel text, resolution text, state text, note text,
               created_at timestamptz, resolved_at timestamptz, resolved_by text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_before_at timestamptz := coalesce(p_before_at, 'infinity');
    v_before_id bigint := coalesce(p_before_id, 9223372036854775807);
    v_upto timestamptz := now() - make_interval(secs => coalesce(p_min_age_s, 0));
BEGIN
    IF p_state IS NULL OR p_state NOT IN ('open', 'resolved', 'refunded', 'all') THEN
        PERFORM _bad_arg('console_exceptions: state must be open, resolved, refunded or all');
    END IF;
    IF p_kind IS NOT NULL AND p_kind NOT IN ('late_payment', 'double_payment', 'amount_mismatch',
                                             'unknown_order', 'refused_payment',
                                             'currency_mismatch', 'overpaid', 'cancelled_part') THEN
        PERFORM _bad_arg(format('console_exceptions: no exception kind %L', p_kind));
    END IF;
    IF p_min_age_s IS NOT NULL AND p_min_age_s NOT BETWEEN 0 AND 315360000 THEN
        PERFORM _bad_arg('console_exceptions: min_age_s must be 0..315360000');
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 500 THEN
        PERFORM _bad_arg('console_exceptions: limit must be 1..500');
    END IF;
    IF (p_before_at IS NULL) <> (p_before_id IS NULL) THEN
        PERFORM _bad_arg('console_exceptions: before_at and before_id go together');
    END IF;
    IF v_upto > v_before_at THEN
        v_upto := v_before_at;
    END IF;
    IF p_state = 'open' THEN
        RETURN QUERY
        SELECT e.id, e.order_no, e.kind, e.txn_no, e.amount_cents, e.currency::text, p.channel,
               e.resolution, e.state, e.note, e.created_at, e.resolved_at, e.resolved_by
          FROM exceptions e LEFT JOIN payments p ON p.txn_no = e.txn_no
         WHERE e.state = 'open'
           AND (e.created_at, e.id) < (v_before_at, v_before_id)
           AND e.created_at <= v_upto
           AND (p_kind IS NULL OR e.kind = p_kind)
           AND (p_min_amount IS NULL OR e.amount_cents >= p_min_amount)
           AND (p_channel IS NULL OR p.channel = p_channel)
         ORDER BY e.created_at DESC, e.id DESC
         LIMIT p_limit;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.id, e.order_no, e.kind, e.txn_no, e.amount_cents, e.currency::text, p.channel,
           e.resolution, e.state, e.note, e.created_at, e.resolved_at, e.resolved_by
      FROM exceptions e LEFT JOIN payments p ON p.txn_no = e.txn_no
     WHERE (p_state = 'all' OR e.state = p_state)
       AND (e.created_at, e.id) < (v_before_at, v_before_id)
       AND e.created_at <= v_upto
       AND (p_kind IS NULL OR e.kind = p_kind)
       AND (p_min_amount IS NULL OR e.amount_cents >= p_min_amount)
       AND (p_channel IS NULL OR p.channel = p_channel)
     ORDER BY e.created_at DESC, e.id DESC
     LIMIT p_limit;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_exceptions(text,text,bigint,bigint,text,timestamptz,bigint,int)
    TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_exceptions(text,text,bigint,bigint,text,timestamp with time zone,bigint,integer) IS
    'One keyset page of the console''s exception queue, filtered, newest first';
