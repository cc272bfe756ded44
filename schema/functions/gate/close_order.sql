-- close_order: manual close by operations, any time (no due check). Same side effects as a cancel;
-- status_log source 'manual', actor = operator, note = reason. Outcomes: cancelled |
-- already_cancelled | already_paid | already_released (release_order let it go unpaid: never
-- cancelled) | not_found.
CREATE OR REPLACE FUNCTION ordergate.close_order(order_no text, operator text, reason text)
RETURNS TABLE (outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := close_order.order_no;
    p_operator text := btrim(close_order.operator);
    p_reason   text := btrim(close_order.reason);
    v_status   text;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('close_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_operator IS NULL OR length(p_operator) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('close_order: operator is required (1..128 characters)');
    END IF;
    IF p_reason IS NULL OR length(p_reason) NOT BETWEEN 1 AND 2000 THEN
        PERFORM _bad_arg('close_order: reason is required (1..2000 characters)');
    END IF;

    IF _cancel_orders(ARRAY[p_order_no], 'manual', p_operator, p_reason, false) IS NOT NULL THEN
        RETURN QUERY SELECT 'cancelled'::text, 'cancelled'::text;
        RETURN;
    END IF;

    SELECT o.status INTO v_status FROM orders o WHERE o.order_no = p_order_no;
    RETURN QUERY SELECT CASE v_status
                            WHEN 'paid' THEN 'already_paid'
                            WHEN 'cancelled' THEN 'already_cancelled'
                            WHEN 'released' THEN 'already_released'
                            ELSE 'not_found'
                        END::text,
                        v_status;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.close_order(text,text,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.close_order(text,text,text) IS
    'Cancels a pending order by hand, due or not (source manual, actor the operator)';
