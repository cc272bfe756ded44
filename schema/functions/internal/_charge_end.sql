-- _charge_end: ends one charge (captured by claim_payment, failed by charge_failed) and keeps its
-- order's charge_until equal to the latest bound of its pending charges. The caller has checked
-- that p_charge_ref names a charge of p_order_no (hot or archived). It decides no payment and
-- cancels nothing: it says whether the order is now due (o_due) and the caller schedules the
-- prompt cancel, once it knows the order stays pending.
--
-- Lock order as every gate function's: the order row first (FOR NO KEY UPDATE, the lock the
-- cancel claim and hold_for_payment take), then the charge row. A charge ending and a cancel
-- queue on the order: the timeout claim skips the locked row (busy, retried) and then sees the
-- new charge_until, or it claimed first and the charge ends late (ended_late).
--
-- o_prev: the charge's state before the call ('pending': this call ended it), NULL when the charge
-- is only in the archive (its order archived: the archive is history and does not change).
-- o_due: this call ended the last charge that protected a pending order whose deadline passed.
-- A closed order's charge_until is left as it is: only pending orders read it.
CREATE OR REPLACE FUNCTION ordergate._charge_end(p_order_no text, p_charge_ref text, p_state text,
                                                 p_txn text, OUT o_prev text, OUT o_due boolean)
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_status text;
    v_expire timestamptz;
    v_until  timestamptz;
    v_new    timestamptz;
BEGIN
    o_due := false;
    SELECT o.status, o.expire_at, o.charge_until INTO v_status, v_expire, v_until
      FROM orders o
     WHERE o.order_no = p_order_no
       FOR NO KEY UPDATE;

    UPDATE charges c
       SET state = p_state, txn_no = p_txn, ended_at = now(),
           ended_late = v_status IS DISTINCT FROM 'pending_payment'
     WHERE c.charge_ref = p_charge_ref
       AND c.state = 'pending';
    IF NOT FOUND THEN
        SELECT c.state INTO o_prev FROM charges c WHERE c.charge_ref = p_charge_ref;
        RETURN;
    END IF;
    o_prev := 'pending';
    IF v_status IS DISTINCT FROM 'pending_payment' THEN
        RETURN;
    END IF;

    SELECT max(c.bound_at) INTO v_new
      FROM charges c
     WHERE c.order_no = p_order_no
       AND c.state = 'pending';
    IF v_new IS DISTINCT FROM v_until THEN
        UPDATE orders o SET charge_until = v_new WHERE o.order_no = p_order_no;
    END IF;
    -- Due now, and only now: protected until this call, unprotected after it, deadline passed.
    -- An order whose charge's bound had already passed was due before; its cancel is under way.
    o_due := v_expire <= now() AND v_until > now() AND (v_new IS NULL OR v_new <= now());
END
$$;
COMMENT ON FUNCTION ordergate._charge_end(text,text,text,text) IS
    'Internal: ends a pending charge (captured or failed), recomputes its order''s charge_until, says whether the order is due now';
