-- exception_list: the follow-up queue, newest first. p_state: 'open' | 'resolved' | 'all'.
-- p_limit 1..10000. total = how many rows match before the limit (the same on every row), so a
-- caller can say "showing 50 of 312". currency: the currency of amount_cents (NULL without an
-- amount), last so that readers by position keep working.
CREATE OR REPLACE FUNCTION ordergate.exception_list(p_state text, p_limit int)
RETURNS TABLE (id bigint, order_no text, kind text, txn_no text, amount_cents bigint,
               resolution text, state text, note text, created_at text, resolved_at text,
               resolved_by text, total bigint, currency text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_state IS NULL OR p_state NOT IN ('open', 'resolved', 'all') THEN
        RAISE EXCEPTION 'exception_list: state must be open, resolved or all' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'exception_list: limit must be 1..10000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT e.id, e.order_no, e.kind, e.txn_no, e.amount_cents, e.resolution, e.state, e.note,
           _ctl_iso(e.created_at), _ctl_iso(e.resolved_at), e.resolved_by,
           count(*) OVER (), e.currency::text
      FROM exceptions e
     WHERE p_state = 'all' OR e.state = p_state
     ORDER BY e.created_at DESC, e.id DESC
     LIMIT p_limit;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.exception_list(text,int) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.exception_list(text,integer) IS
    'The payment follow-up queue, newest first, with the count before the limit';
