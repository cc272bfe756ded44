-- scan_overdue_count: what a sweep with this grace would find now (the dry run's figures): the
-- overdue pending orders no charge protects, as scan_overdue pages them.
CREATE OR REPLACE FUNCTION ordergate.scan_overdue_count(p_grace interval)
RETURNS TABLE (overdue bigint, oldest_expire_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        PERFORM _bad_arg('scan_overdue_count: p_grace must be a non-negative interval');
    END IF;
    RETURN QUERY
    SELECT count(*), min(o.expire_at)
      FROM orders o
     WHERE o.status = 'pending_payment'
       AND o.expire_at < now() - p_grace
       AND (o.charge_until IS NULL OR o.charge_until < now() - p_grace);
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scan_overdue_count(interval) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scan_overdue_count(interval) IS
    'How many pending orders a sweep with this grace would find now, and the oldest deadline';
