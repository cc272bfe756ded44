-- claim_payment: apply a payment callback. Idempotent by txn_no. Outcomes:
--   paid            this call moved the order pending_payment -> paid (first claim wins; the clock
--                   does not matter: after expire_at but before any cancel, payment wins)
--   duplicate       txn_no seen before: nothing changes; first_outcome = that first call's outcome
--   late_payment    the order was cancelled: exception (auto_refund <= auto_refund_limit_cents,
--                   else manual_review) + outbox refund_requested | reconciliation_alert
--   double_payment  the order was paid by another txn: exception + refund event (same policy)
--   amount_mismatch order pending but amount differs: order stays pending; exception manual_review
--                   + reconciliation_alert
--   not_found       unknown order: exception unknown_order (manual_review) + reconciliation_alert
-- Every call with a new txn_no records a payments row with its outcome. The shop's hooks run last,
-- inside this transaction: 'paid' for a paid outcome, 'late_payment' for a late one
-- (_hooks_run); a hook that raises aborts the call, payments row included. status = the order's
-- status after the call (for duplicate: the status of the order the txn was first recorded for).
--
-- The payments row is inserted first (ON CONFLICT DO NOTHING): concurrent retries of one txn_no
-- serialize on its primary key, only the inserter proceeds; if the inserter rolls back (client
-- timeout), the retry inserts and proceeds itself.
--
-- Archived history (ordergate.archive) answers as the hot tables would have: a txn_no found in
-- archived_payments is a duplicate (with its first outcome), and a payment for an archived order
-- is late_payment (cancelled) or double_payment (paid), with its exception and event; the archived
-- order is never touched. A payment that waited for archive() to release the order finds it there.
CREATE OR REPLACE FUNCTION ordergate.claim_payment(order_no text, txn_no text, amount_cents bigint, channel text)
RETURNS TABLE (outcome text, status text, first_outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text   := claim_payment.order_no;
    p_txn      text   := claim_payment.txn_no;
    p_amount   bigint := claim_payment.amount_cents;
    p_channel  text   := claim_payment.channel;
    v_coupon   text;
    v_shop     jsonb;
    v_status   text;
    v_first    text;
    v_outcome  text;
    v_kind     text;
    v_res      text;
    v_exc_id   bigint;
    v_actor    text := _actor();
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_txn IS NULL OR length(p_txn) > 128 OR p_txn !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: txn_no must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        PERFORM _bad_arg('claim_payment: amount_cents must be > 0');
    END IF;
    IF p_channel IS NULL OR length(p_channel) NOT BETWEEN 1 AND 64 THEN
        PERFORM _bad_arg('claim_payment: channel is required (1..64 characters)');
    END IF;

    INSERT INTO payments (txn_no, order_no, amount_cents, channel, outcome)
    VALUES (p_txn, p_order_no, p_amount, p_channel, 'processing')
    ON CONFLICT (txn_no) DO NOTHING;
    IF NOT FOUND THEN
        -- The first outcome, hot or archived: an archive() that committed between the insert and
        -- this statement moved the row, and this one snapshot sees it in exactly one table. An
        -- archived payment names its archived order first.
        SELECT p.outcome, CASE WHEN p.archived THEN coalesce(a.status, o.status)
                               ELSE coalesce(o.status, a.status) END
          INTO v_first, v_status
          FROM (SELECT h.outcome, h.order_no, false AS archived FROM payments h WHERE h.txn_no = p_txn
                UNION ALL
                SELECT x.outcome, x.order_no, true FROM archived_payments x WHERE x.txn_no = p_txn) p
          LEFT JOIN orders o ON o.order_no = p.order_no
          LEFT JOIN archived_orders a ON a.order_no = p.order_no;
        RETURN QUERY SELECT 'duplicate'::text, v_status, v_first;
        RETURN;
    END IF;
    -- Seen before and archived since (a new statement: it sees an archive() that committed while
    -- the insert waited for the row it deleted). This call's row goes again.
    SELECT p.outcome, coalesce(a.status, o.status) INTO v_first, v_status
      FROM archived_payments p
      LEFT JOIN orders o ON o.order_no = p.order_no
      LEFT JOIN archived_orders a ON a.order_no = p.order_no
     WHERE p.txn_no = p_txn;
    IF FOUND THEN
        DELETE FROM payments p WHERE p.txn_no = p_txn;
        RETURN QUERY SELECT 'duplicate'::text, v_status, v_first;
        RETURN;
    END IF;

    -- The claim.
    UPDATE orders o
       SET status = 'paid', closed_at = now()
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
       AND o.amount_cents = p_amount
    RETURNING o.coupon_id, o.shop INTO v_coupon, v_shop;

    IF FOUND THEN
        IF v_coupon IS NOT NULL THEN
            UPDATE coupons c SET state = 'used' WHERE c.coupon_id = v_coupon AND c.state = 'locked';
        END IF;
        INSERT INTO status_log (order_no, from_status, to_status, source, idempotency_key, actor)
        VALUES (p_order_no, 'pending_payment', 'paid', 'payment_callback', p_txn, v_actor);
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('order_paid', p_order_no,
                jsonb_build_object('v', 1, 'event', 'order_paid', 'order_no', p_order_no,
                                   'txn_no', p_txn, 'amount_cents', p_amount, 'channel', p_channel,
                                   'source', 'payment_callback', 'actor', v_actor,
                                   'coupon_id', v_coupon, 'items', _order_items_json(p_order_no),
                                   'shop', v_shop, 'paid_at', now()));
        UPDATE payments p SET outcome = 'paid' WHERE p.txn_no = p_txn;
        PERFORM _hooks_run('paid', ARRAY[p_order_no], 'payment_callback');
        RETURN QUERY SELECT 'paid'::text, 'paid'::text, 'paid'::text;
        RETURN;
    END IF;

    -- Lost (or amount differs): read the current status under a share lock, so a pending order
    -- cannot be cancelled between this read and the exception we record for it.
    -- The coupon too, for the event.
    SELECT o.status, o.coupon_id, o.shop INTO v_status, v_coupon, v_shop
      FROM orders o WHERE o.order_no = p_order_no FOR SHARE;
    IF v_status IS NULL THEN
        -- Archived orders are closed and never change: no lock needed.
        SELECT a.status, a.coupon_id, a.shop INTO v_status, v_coupon, v_shop
          FROM archived_orders a WHERE a.order_no = p_order_no;
    END IF;

    IF v_status IS NULL THEN
        v_outcome := 'not_found';       v_kind := 'unknown_order';   v_res := 'manual_review';
    ELSIF v_status = 'cancelled' THEN
        v_outcome := 'late_payment';    v_kind := 'late_payment';
    ELSIF v_status = 'paid' THEN
        v_outcome := 'double_payment';  v_kind := 'double_payment';
    ELSE
        v_outcome := 'amount_mismatch'; v_kind := 'amount_mismatch'; v_res := 'manual_review';
    END IF;
    IF v_res IS NULL THEN
        v_res := CASE WHEN p_amount <= _setting_bigint('auto_refund_limit_cents', 5000)
                      THEN 'auto_refund' ELSE 'manual_review' END;
    END IF;

    INSERT INTO exceptions (order_no, kind, txn_no, amount_cents, resolution, note)
    VALUES (p_order_no, v_kind, p_txn, p_amount, v_res,
            format('payment %s via %s, order status %s', p_txn, p_channel, coalesce(v_status, 'unknown')))
    RETURNING id INTO v_exc_id;

    -- The order's coupon and lines go with the event: a refund reader knows what the money was for.
    INSERT INTO outbox (event_type, order_no, payload)
    VALUES (CASE v_res WHEN 'auto_refund' THEN 'refund_requested' ELSE 'reconciliation_alert' END,
            p_order_no,
            jsonb_build_object('v', 1,
                               'event', CASE v_res WHEN 'auto_refund' THEN 'refund_requested'
                                                   ELSE 'reconciliation_alert' END,
                               'order_no', p_order_no, 'txn_no', p_txn, 'amount_cents', p_amount,
                               'channel', p_channel, 'kind', v_kind, 'resolution', v_res,
                               'exception_id', v_exc_id, 'order_status', v_status,
                               'source', 'payment_callback', 'actor', v_actor,
                               'coupon_id', v_coupon, 'items', _order_items_json(p_order_no),
                               'shop', v_shop));

    UPDATE payments p SET outcome = v_outcome WHERE p.txn_no = p_txn;
    IF v_outcome = 'late_payment' THEN
        PERFORM _hooks_run('late_payment', ARRAY[p_order_no], 'payment_callback');
    END IF;
    RETURN QUERY SELECT v_outcome, v_status, v_outcome;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.claim_payment(text,text,bigint,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.claim_payment(text,text,bigint,text) IS
    'Applies a payment callback, idempotent by txn_no: paid, or the exception a late, double or mismatched payment needs';
