-- scan_overdue: one keyset page of pending orders with expire_at < now() - p_grace (database
-- clock) and no charge pending within its bound (charge_until NULL or < now() - p_grace), in
-- (expire_at, order_no) order, after the given position (NULLs: from the start). An order a
-- charge protects is left out, not returned: the claim would answer it not_due, and the keyset
-- moves past it with the rest of the page, so a sweep never returns it twice; a later run finds
-- it once the charge ends or its bound passes.
-- Both branches are range scans of orders_overdue_idx (migrations/001_core.sql): the partial index holds pending
-- orders only, so a page costs the same whatever the number of closed orders.
CREATE OR REPLACE FUNCTION ordergate.scan_overdue(p_grace interval, p_after_expire timestamptz,
                                       p_after_order text, p_limit int)
RETURNS TABLE (order_no text, expire_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_cutoff timestamptz;
BEGIN
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        PERFORM _bad_arg('scan_overdue: p_grace must be a non-negative interval');
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('scan_overdue: p_limit must be 1..10000');
    END IF;
    IF (p_after_expire IS NULL) <> (p_after_order IS NULL) THEN
        PERFORM _bad_arg('scan_overdue: give both p_after_expire and p_after_order, or neither');
    END IF;
    v_cutoff := now() - p_grace;
    IF p_after_expire IS NULL THEN
        RETURN QUERY
        SELECT o.order_no, o.expire_at
          FROM orders o
         WHERE o.status = 'pending_payment'
           AND o.expire_at < v_cutoff
           AND (o.charge_until IS NULL OR o.charge_until < v_cutoff)
         ORDER BY o.expire_at, o.order_no
         LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT o.order_no, o.expire_at
          FROM orders o
         WHERE o.status = 'pending_payment'
           AND o.expire_at < v_cutoff
           AND (o.charge_until IS NULL OR o.charge_until < v_cutoff)
           AND (o.expire_at, o.order_no) > (p_after_expire, p_after_order)
         ORDER BY o.expire_at, o.order_no
         LIMIT p_limit;
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scan_overdue(interval,timestamptz,text,int) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scan_overdue(interval,timestamp with time zone,text,integer) IS
    'One keyset page of overdue pending orders, for the scanner''s sweep';
