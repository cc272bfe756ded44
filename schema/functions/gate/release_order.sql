-- release_order: staff take a pending order out of the gate unpaid (cash on delivery, an
-- invoice, terms): status released, never cancelled afterwards. Outcomes:
--   released     this call moved the order pending_payment -> released
--   not_pending  the order is closed (paid, cancelled, released; archived included): nothing
--                changed; status = its status
--   not_found    no such order (status NULL)
-- Like a paid order, a released one keeps its stock reserved (the lines stay as they are) and
-- its coupon used (locked -> used). A payment that arrives for it later is its payment
-- (claim_payment: released -> paid, no stock or coupon change); a second one is a double payment.
-- Logged in status_log with source manual, actor = operator, note = reason, key = the order
-- number; one outbox event order_released; the shop's hooks for event released run last
-- (_hooks_run, context {operator, reason}), inside this transaction. Waits for the order's row lock like close_order (a
-- payment or a cancel in flight decides first, and this call then sees what it left). Lock
-- order: the order row, then its coupon (schema/README.md, "Lock order").
-- Errors, nothing written: 22023 for a malformed order number, an operator outside 1..128
-- characters or a reason outside 1..2000 (both trimmed).
CREATE OR REPLACE FUNCTION ordergate.release_order(order_no text, operator text, reason text)
RETURNS TABLE (outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := release_order.order_no;
    p_operator text := btrim(release_order.operator);
    p_reason   text := btrim(release_order.reason);
    v_status   text;
    v_coupon   text;
    v_shop     jsonb;
    v_amount   bigint;
    v_cur      text;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('release_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_operator IS NULL OR length(p_operator) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('release_order: operator is required (1..128 characters)');
    END IF;
    IF p_reason IS NULL OR length(p_reason) NOT BETWEEN 1 AND 2000 THEN
        PERFORM _bad_arg('release_order: reason is required (1..2000 characters)');
    END IF;

    -- The claim, one conditional UPDATE: a concurrent payment or cancel that holds the row is
    -- waited for, and the status is re-checked on the version it left.
    UPDATE orders o
       SET status = 'released', closed_at = now()
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
    RETURNING o.coupon_id, o.shop, o.amount_cents, o.currency
      INTO v_coupon, v_shop, v_amount, v_cur;
    IF NOT FOUND THEN
        SELECT o.status INTO v_status FROM orders o WHERE o.order_no = p_order_no;
        IF v_status IS NULL THEN
            SELECT a.status INTO v_status FROM archived_orders a WHERE a.order_no = p_order_no;
        END IF;
        RETURN QUERY SELECT CASE WHEN v_status IS NULL THEN 'not_found' ELSE 'not_pending' END::text,
                            v_status;
        RETURN;
    END IF;

    IF v_coupon IS NOT NULL THEN
        UPDATE coupons c SET state = 'used' WHERE c.coupon_id = v_coupon AND c.state = 'locked';
    END IF;
    INSERT INTO status_log (order_no, from_status, to_status, source, idempotency_key, actor, note)
    VALUES (p_order_no, 'pending_payment', 'released', 'manual', p_order_no, p_operator, p_reason);
    INSERT INTO outbox (event_type, order_no, payload)
    VALUES ('order_released', p_order_no,
            jsonb_build_object('v', 1, 'event', 'order_released', 'order_no', p_order_no,
                               'source', 'manual', 'actor', p_operator, 'reason', p_reason,
                               'amount_cents', v_amount, 'coupon_id', v_coupon,
                               'items', _order_items_json(p_order_no), 'shop', v_shop,
                               'released_at', now(), 'currency', v_cur));
    PERFORM _hooks_run('released', ARRAY[p_order_no], 'manual',
                       jsonb_build_object(p_order_no, jsonb_build_object('operator', p_operator,
                                                                         'reason', p_reason)));
    RETURN QUERY SELECT 'released'::text, 'released'::text;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.release_order(text,text,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.release_order(text,text,text) IS
    'Takes a pending order out of the gate unpaid (staff): released, never cancelled; stock stays reserved, coupon used';
