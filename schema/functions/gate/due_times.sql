-- One row per distinct order number of the array that is still pending_payment, with the time it
-- falls due: greatest(expire_at, charge_until), its deadline or, while a charge is pending, that
-- charge's bound (the column keeps its name expire_at for the callers). The consumer re-schedules
-- a not_due order by it, so an order protected by a charge waits for the charge's bound, and a
-- charge that ends first writes its own cancel due now (charge_failed). Orders that are paid,
-- cancelled or unknown have no row: nothing is left to schedule for them. At most 10000 order
-- numbers per call (the gate's batch limit).
CREATE OR REPLACE FUNCTION ordergate.due_times(p_order_nos text[])
RETURNS TABLE (order_no text, expire_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_order_nos IS NULL THEN
        RAISE EXCEPTION 'due_times: order numbers must not be NULL' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_order_nos) > 10000 THEN
        RAISE EXCEPTION 'due_times: at most 10000 order numbers per call, got %',
            cardinality(p_order_nos) USING ERRCODE = '22023';
    END IF;
    -- One primary-key probe per distinct order number (a LATERAL subquery depends on the outer
    -- row, so it cannot become a walk of the partial overdue index, whatever the statistics or
    -- the plan cache say: schema/README.md, "Plan stability").
    RETURN QUERY
    SELECT l.order_no, l.due_at
      FROM (SELECT DISTINCT u.x FROM unnest(p_order_nos) AS u(x)) n
     CROSS JOIN LATERAL (
            SELECT o.order_no, greatest(o.expire_at, o.charge_until) AS due_at
              FROM ordergate.orders o
             WHERE o.order_no = n.x
               AND o.status = 'pending_payment') l;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.due_times(text[]) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.due_times(text[]) IS
    'When each still-pending order of a batch falls due (its deadline or its pending charge''s bound), so the consumer reschedules early messages';
