-- begin_charge: a charge of the order is in flight at the payment provider (a bank redirect,
-- 3-D Secure, a transfer, a debit). Until it ends (captured by claim_payment with this
-- charge_ref, or charge_failed) or its bound passes, a timeout does not cancel the order.
-- Outcomes (bound_at: the charge's bound, NULL when nothing is recorded):
--   pending      recorded: bound_at = now() + max_seconds; the order's charge_until =
--                greatest(charge_until, bound_at)
--   duplicate    this charge_ref was begun for this order before: nothing changes; its bound_at
--   not_pending  the order is closed (paid or cancelled, archived included): nothing recorded
--   not_found    no such order: nothing recorded
-- 22023 and nothing written: a malformed order_no or charge_ref ([A-Za-z0-9._:-], 1..128), a
-- charge_ref of another order (hot or archived), max_seconds NULL, < 1 or above the setting
-- max_pending_charge_seconds.
--
-- Lock order: the order row first (FOR NO KEY UPDATE, as the cancel claim takes it), then the
-- charge's key. Against a timeout cancel at the same instant: the cancel skips the locked order
-- (busy, retried) and its retry sees charge_until; or the cancel claimed first and this call,
-- waiting for the lock, finds the order closed (not_pending).
CREATE OR REPLACE FUNCTION ordergate.begin_charge(order_no text, charge_ref text, max_seconds integer)
RETURNS TABLE (outcome text, bound_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := begin_charge.order_no;
    p_ref      text := begin_charge.charge_ref;
    p_seconds  int  := begin_charge.max_seconds;
    v_max      bigint := _setting_bigint('max_pending_charge_seconds', 259200);
    v_status   text;
    v_owner    text;
    v_bound    timestamptz;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('begin_charge: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_ref IS NULL OR length(p_ref) > 128 OR p_ref !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('begin_charge: charge_ref must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_seconds IS NULL OR p_seconds < 1 OR p_seconds > v_max THEN
        PERFORM _bad_arg(format('begin_charge: max_seconds must be 1..%s (max_pending_charge_seconds)', v_max));
    END IF;

    SELECT o.status INTO v_status
      FROM orders o
     WHERE o.order_no = p_order_no
       FOR NO KEY UPDATE;

    -- The reference, after the lock: a reference names one charge of one order, ever.
    SELECT c.order_no, c.bound_at INTO v_owner, v_bound
      FROM (SELECT h.order_no, h.bound_at FROM charges h WHERE h.charge_ref = p_ref
            UNION ALL
            SELECT a.order_no, a.bound_at FROM archived_charges a WHERE a.charge_ref = p_ref) c;
    IF FOUND THEN
        IF v_owner <> p_order_no THEN
            PERFORM _bad_arg(format('begin_charge: charge_ref %s belongs to another order', p_ref));
        END IF;
        RETURN QUERY SELECT 'duplicate'::text, v_bound;
        RETURN;
    END IF;

    IF v_status IS NULL THEN
        RETURN QUERY SELECT CASE WHEN EXISTS (SELECT 1 FROM archived_orders a WHERE a.order_no = p_order_no)
                                 THEN 'not_pending' ELSE 'not_found' END::text,
                            NULL::timestamptz;
        RETURN;
    END IF;
    IF v_status <> 'pending_payment' THEN
        RETURN QUERY SELECT 'not_pending'::text, NULL::timestamptz;
        RETURN;
    END IF;

    -- A begin of the same reference for another order, committed since the read above, holds
    -- the key: this insert waits for it and does nothing; the re-read tells which order won.
    INSERT INTO charges AS c (charge_ref, order_no, bound_at)
    VALUES (p_ref, p_order_no, now() + make_interval(secs => p_seconds))
    ON CONFLICT (charge_ref) DO NOTHING
    RETURNING c.bound_at INTO v_bound;
    IF NOT FOUND THEN
        SELECT c.order_no, c.bound_at INTO v_owner, v_bound FROM charges c WHERE c.charge_ref = p_ref;
        IF v_owner <> p_order_no THEN
            PERFORM _bad_arg(format('begin_charge: charge_ref %s belongs to another order', p_ref));
        END IF;
        RETURN QUERY SELECT 'duplicate'::text, v_bound;
        RETURN;
    END IF;

    UPDATE orders o
       SET charge_until = greatest(o.charge_until, v_bound)
     WHERE o.order_no = p_order_no;
    RETURN QUERY SELECT 'pending'::text, v_bound;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.begin_charge(text,text,integer) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.begin_charge(text,text,integer) IS
    'Records a charge in flight: the order is not cancelled by a timeout while it is pending, up to its bound';
