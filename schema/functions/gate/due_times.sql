-- One row per distinct order number of the array that is still pending_payment, with its current
-- expire_at. Orders that are paid, cancelled or unknown have no row: nothing is left to schedule
-- for them. At most 10000 order numbers per call (the gate's batch limit).
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
    SELECT l.order_no, l.expire_at
      FROM (SELECT DISTINCT u.x FROM unnest(p_order_nos) AS u(x)) n
     CROSS JOIN LATERAL (
            SELECT o.order_no, o.expire_at
              FROM ordergate.orders o
             WHERE o.order_no = n.x
               AND o.status = 'pending_payment') l;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.due_times(text[]) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.due_times(text[]) IS
    'The current deadline of each still-pending order of a batch, so the consumer reschedules early messages';
