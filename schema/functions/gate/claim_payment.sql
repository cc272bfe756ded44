-- claim_payment: apply a payment callback. Idempotent by txn_no. Outcomes:
--   paid              this call moved the order pending_payment -> paid (first claim wins; the
--                     clock does not matter: after expire_at but before any cancel, payment wins)
--   partial           an allow_partial order, a part below what remains: captured (captured_cents
--                     grows), the order stays pending; no exception, no event
--   overpaid          an allow_partial order, a part beyond what remains: the order is paid, and
--                     the excess gets an exception overpaid (auto_refund within the currency's
--                     limit, else manual_review) + refund_requested | reconciliation_alert
--   duplicate         txn_no seen before: nothing changes; first_outcome = that first call's outcome
--   late_payment      the order was cancelled: exception (auto_refund within the currency's limit,
--                     _refund_limit, else manual_review) + outbox refund_requested | reconciliation_alert
--   double_payment    the order was paid by another txn: exception + refund event (same policy)
--                     (a released order is not paid: its first payment answers paid, below)
--   amount_mismatch   order pending, not allow_partial, amount differs: order stays pending;
--                     exception manual_review + reconciliation_alert
--   currency_mismatch the payment names another currency than the order's (any status): never
--                     claims; exception currency_mismatch (manual_review) + reconciliation_alert
--   not_found         unknown order: exception unknown_order (manual_review) + reconciliation_alert
-- A released order (release_order) is paid by its payment as a pending one is: outcome paid (or
-- partial, overpaid for an allow_partial order), released -> paid, logged (from_status
-- released), event order_paid, hook paid; its stock and coupon already are a paid order's, so
-- nothing else moves. A payment of another amount, or one for a released order archived before
-- it came, is amount_mismatch (manual_review).
-- Every call with a new txn_no records a payments row with its outcome and currency. The shop's
-- hooks run last, inside this transaction: 'paid' for a paid or overpaid outcome (with the
-- source the log names: payment_callback or manual_payment), 'late_payment' for a late one,
-- 'payment_exception' for double_payment, amount_mismatch, currency_mismatch and not_found
-- (_hooks_run); a hook that raises aborts the call, payments row included. Their context (for
-- three-argument hooks, schema/README.md "Effect hooks") is the payment: txn_no, amount_cents,
-- currency, channel, outcome, operator, reason, charge_ref, the order's shop data, and
-- exception_id, kind and resolution when the outcome recorded an exception. One look at the
-- hooks of the event decides: none, and _hooks_run is not called at all; two-argument ones
-- only, and no context is built (a payment without hooks pays one small query for them).
-- status = the order's status after the call (for duplicate: the status of the order the txn
-- was first recorded for).
--
-- currency: an ISO 4217 code in currencies, NULL = the order's (for an unknown order: the
-- setting default_currency). Amounts are minor units of that currency.
-- operator, reason: a payment taken by staff (channel 'manual'), both or neither: the payments
-- row keeps them, and a paid outcome is logged with source manual_payment, actor = operator,
-- note = reason. charge_ref: NULL or the reference of a charge of this order (1..128 of
-- [A-Za-z0-9._:-], begun with begin_charge); recorded with the payment. The capture ends the
-- charge (captured, with this txn_no) and recomputes the order's charge_until before the payment
-- is decided as any other; a capture that leaves an order due (past its deadline, no charge left
-- pending, not paid by this payment) schedules its cancel now, as charge_failed does.
-- Errors, nothing written: 22023 for a malformed argument, an amount outside 1..10^15, an
-- unknown currency, a charge_ref never begun or of another order, operator
-- without reason (or the reverse), operator with another channel than manual.
--
-- The claim is one conditional UPDATE of the order row (of two forms, see below): a part of an
-- allow_partial order adds to captured_cents and pays the order when it reaches the amount, in
-- the same statement. The row lock it takes orders it against the cancel chain, which locks the
-- same row first: a part that commits before a cancel is seen by the cancel (cancelled_part
-- exception), a part that comes after it finds the order cancelled (late_payment). Two parts at
-- once queue on the row, and the second adds to what the first left.
--
-- The payments row is inserted first (ON CONFLICT DO NOTHING): concurrent retries of one txn_no
-- serialize on its primary key, only the inserter proceeds; if the inserter rolls back (client
-- timeout), the retry inserts and proceeds itself.
--
-- Archived history (ordergate.archive) answers as the hot tables would have: a txn_no found in
-- archived_payments is a duplicate (with its first outcome), and a payment for an archived order
-- is late_payment (cancelled) or double_payment (paid), with its exception and event; the archived
-- order is never touched. A payment that waited for archive() to release the order finds it there.
CREATE OR REPLACE FUNCTION ordergate.claim_payment(order_no text, txn_no text, amount_cents bigint,
                                                    channel text, currency text DEFAULT NULL,
                                                    charge_ref text DEFAULT NULL,
                                                    operator text DEFAULT NULL,
                                                    reason text DEFAULT NULL)
RETURNS TABLE (outcome text, status text, first_outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text   := claim_payment.order_no;
    p_txn      text   := claim_payment.txn_no;
    p_amount   bigint := claim_payment.amount_cents;
    p_channel  text   := claim_payment.channel;
    p_currency text   := claim_payment.currency;
    p_charge   text   := claim_payment.charge_ref;
    p_operator text   := btrim(claim_payment.operator);
    p_reason   text   := btrim(claim_payment.reason);
    v_cur      text;    -- the payment's currency
    v_ocur     text;    -- the order's currency
    v_coupon   text;
    v_shop     jsonb;
    v_status   text;
    v_first    text;
    v_outcome  text;
    v_kind     text;
    v_res      text;
    v_exc_id   bigint;
    v_amount   bigint;  -- the order's amount
    v_captured bigint;  -- its captured parts after this one
    v_partial  boolean;
    v_excess   bigint;
    v_source   text;
    v_due      boolean := false;  -- the capture left the order due now (_charge_end)
    v_claimed  boolean;
    v_pay      tid;     -- this call's payments row (see below)
    v_from     text := 'pending_payment';  -- the status the claim moved the order from
    v_actor    text := _actor();
    v_hooks    smallint;  -- the event's hooks: NULL none, else the most arguments one takes
    v_event    text;      -- the hook event of a lost payment
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_txn IS NULL OR length(p_txn) > 128 OR p_txn !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: txn_no must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 OR p_amount > 1000000000000000 THEN
        PERFORM _bad_arg('claim_payment: amount_cents must be 1..10^15 (minor units of the currency)');
    END IF;
    IF p_channel IS NULL OR length(p_channel) NOT BETWEEN 1 AND 64 THEN
        PERFORM _bad_arg('claim_payment: channel is required (1..64 characters)');
    END IF;
    -- The checks that read a table are nested under a plain test: a condition with a subquery
    -- runs through the executor on every call even when its first operand is false, and a
    -- payment without a currency or a charge (most of them) should not pay for that.
    IF p_currency IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM currencies c WHERE c.code = p_currency) THEN
            PERFORM _bad_arg(format('claim_payment: currency %s is not an ISO 4217 code in currencies',
                                    p_currency));
        END IF;
    END IF;
    IF p_charge IS NOT NULL THEN
        IF length(p_charge) > 128 OR p_charge !~ '^[A-Za-z0-9._:-]+$' THEN
            PERFORM _bad_arg('claim_payment: charge_ref must be NULL or 1..128 characters of [A-Za-z0-9._:-]');
        END IF;
        -- A charge reference names one charge of one order forever: checked before anything is
        -- written.
        IF NOT EXISTS (SELECT 1 FROM charges c WHERE c.charge_ref = p_charge AND c.order_no = p_order_no
                       UNION ALL
                       SELECT 1 FROM archived_charges a WHERE a.charge_ref = p_charge AND a.order_no = p_order_no) THEN
            PERFORM _bad_arg(format('claim_payment: charge_ref %s names no charge of order %s', p_charge, p_order_no));
        END IF;
    END IF;
    IF (p_operator IS NULL) <> (p_reason IS NULL) THEN
        PERFORM _bad_arg('claim_payment: a payment taken by staff names both operator and reason');
    END IF;
    IF p_operator IS NOT NULL THEN
        IF length(p_operator) NOT BETWEEN 1 AND 128 OR length(p_reason) NOT BETWEEN 1 AND 2000 THEN
            PERFORM _bad_arg('claim_payment: operator must be 1..128 characters, reason 1..2000');
        END IF;
        IF p_channel <> 'manual' THEN
            PERFORM _bad_arg(format('claim_payment: a payment taken by staff (operator %s) has channel manual, not %s',
                                    p_operator, p_channel));
        END IF;
    END IF;
    v_source := CASE WHEN p_operator IS NULL THEN 'payment_callback' ELSE 'manual_payment' END;
    IF p_operator IS NOT NULL THEN
        v_actor := p_operator;
    END IF;

    -- The payment's currency: the one named, else the order's (immutable, read without a lock;
    -- an order archived meanwhile keeps it), else the default; read by the insert itself, which
    -- returns it (nothing on a conflict: a duplicate needs no currency).
    -- The row's ctid comes back too, and the outcome is written through it (a TID scan): a lookup
    -- by txn_no would be planned once per session, and a plan made while payments was empty (a
    -- fresh install, statistics taken before the first sale) is a sequential scan that the
    -- session keeps while the table grows, until autovacuum analyzes it again. Only this
    -- transaction can touch its uncommitted row, so the ctid holds until the end of the call.
    INSERT INTO payments (txn_no, order_no, amount_cents, channel, outcome, currency, operator, reason,
                          charge_ref)
    VALUES (p_txn, p_order_no, p_amount, p_channel, 'processing',
            coalesce(p_currency,
                     (SELECT o.currency FROM orders o WHERE o.order_no = p_order_no),
                     (SELECT a.currency FROM archived_orders a WHERE a.order_no = p_order_no),
                     _default_currency()),
            p_operator, p_reason, p_charge)
    ON CONFLICT (txn_no) DO NOTHING
    RETURNING payments.currency, payments.ctid INTO v_cur, v_pay;
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
        DELETE FROM payments p WHERE p.ctid = v_pay;
        RETURN QUERY SELECT 'duplicate'::text, v_status, v_first;
        RETURN;
    END IF;

    -- The capture: the charge ends before the payment is decided (the order row locked first,
    -- then the charge, as begin_charge and charge_failed lock them; the claim below updates the
    -- row this holds).
    IF p_charge IS NOT NULL THEN
        SELECT e.o_due INTO v_due FROM _charge_end(p_order_no, p_charge, 'captured', p_txn) e;
    END IF;

    -- The claim, one statement: the exact amount pays an order that takes no parts; a part of an
    -- allow_partial order is captured and pays it once the parts reach the amount (amounts are
    -- at most 10^15, so the sum cannot overflow). Two forms, because an UPDATE prepares the rules
    -- of the columns it names (orders_guard_*): a whole payment sets no captured_cents. The
    -- second runs only when the first found no order to pay; allow_partial never changes, so the
    -- two never both match. closed_at moves only with the status.
    UPDATE orders o
       SET status = 'paid', closed_at = now()
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
       AND o.currency = v_cur
       AND o.amount_cents = p_amount
       AND NOT o.allow_partial
    RETURNING o.status, o.coupon_id, o.shop, o.amount_cents, o.captured_cents, o.allow_partial
      INTO v_status, v_coupon, v_shop, v_amount, v_captured, v_partial;
    v_claimed := FOUND;
    IF NOT v_claimed THEN
        UPDATE orders o
           SET captured_cents = o.captured_cents + p_amount,
               status = CASE WHEN p_amount >= o.amount_cents - o.captured_cents
                             THEN 'paid' ELSE o.status END,
               closed_at = CASE WHEN p_amount >= o.amount_cents - o.captured_cents
                                THEN now() ELSE o.closed_at END
         WHERE o.order_no = p_order_no
           AND o.status = 'pending_payment'
           AND o.currency = v_cur
           AND o.allow_partial
        RETURNING o.status, o.coupon_id, o.shop, o.amount_cents, o.captured_cents, o.allow_partial
          INTO v_status, v_coupon, v_shop, v_amount, v_captured, v_partial;
        v_claimed := FOUND;
    END IF;
    -- A released order (release_order: staff let it go unpaid) takes its payment the same way,
    -- released -> paid, parts included; its stock and coupon already are as a paid order's.
    -- Another statement, run only when those above claimed nothing, so a pending order's payment
    -- pays nothing for it.
    IF NOT v_claimed THEN
        UPDATE orders o
           SET captured_cents = CASE WHEN o.allow_partial THEN o.captured_cents + p_amount ELSE 0 END,
               status = CASE WHEN p_amount >= o.amount_cents - o.captured_cents
                             THEN 'paid' ELSE o.status END
         WHERE o.order_no = p_order_no
           AND o.status = 'released'
           AND o.currency = v_cur
           AND (o.amount_cents = p_amount OR o.allow_partial)
        RETURNING o.status, o.coupon_id, o.shop, o.amount_cents, o.captured_cents, o.allow_partial
          INTO v_status, v_coupon, v_shop, v_amount, v_captured, v_partial;
        v_claimed := FOUND;
        v_from := 'released';
    END IF;

    -- A capture that ended the order's last protecting charge past its deadline and did not pay
    -- it (a part, another amount or currency: the order, locked above, stays pending): its
    -- cancel is due now (charge_failed.sql says how it is delivered).
    IF v_due AND v_status IS DISTINCT FROM 'paid' AND _setting_bigint('schedule_cancels', 0) = 1 THEN
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('cancel_scheduled', p_order_no, _cancel_message(p_order_no, now()));
    END IF;

    IF v_claimed AND v_status <> 'paid' THEN
        UPDATE payments p SET outcome = 'partial' WHERE p.ctid = v_pay;
        RETURN QUERY SELECT 'partial'::text, v_status, 'partial'::text;
        RETURN;
    END IF;

    IF v_claimed THEN
        v_outcome := CASE WHEN v_partial AND v_captured > v_amount THEN 'overpaid' ELSE 'paid' END;
        IF v_coupon IS NOT NULL THEN
            UPDATE coupons c SET state = 'used' WHERE c.coupon_id = v_coupon AND c.state = 'locked';
        END IF;
        INSERT INTO status_log (order_no, from_status, to_status, source, idempotency_key, actor, note)
        VALUES (p_order_no, v_from, 'paid', v_source, p_txn, v_actor, p_reason);
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('order_paid', p_order_no,
                jsonb_build_object('v', 1, 'event', 'order_paid', 'order_no', p_order_no,
                                   'txn_no', p_txn, 'amount_cents', p_amount, 'channel', p_channel,
                                   'source', v_source, 'actor', v_actor,
                                   'coupon_id', v_coupon, 'items', _order_items_json(p_order_no),
                                   'shop', v_shop, 'paid_at', now(), 'currency', v_cur));
        UPDATE payments p SET outcome = v_outcome WHERE p.ctid = v_pay;
        IF v_outcome = 'overpaid' THEN
            -- The excess of the part that paid: the parts before it were below the amount.
            v_excess := least(v_captured - v_amount, p_amount);
            SELECT e.o_id, e.o_resolution INTO v_exc_id, v_res
              FROM _payment_exception(p_order_no, 'overpaid', p_txn, v_excess, v_cur, NULL,
                                      format('payment %s via %s paid %s %s of which %s beyond the amount %s',
                                             p_txn, p_channel, p_amount, v_cur, v_excess, v_amount),
                                      p_channel, 'paid', v_source, v_actor, v_coupon, v_shop) e;
        END IF;
        SELECT max(k.nargs) INTO v_hooks FROM hooks k WHERE k.event = 'paid';
        IF v_hooks IS NOT NULL THEN
            PERFORM _hooks_run('paid', ARRAY[p_order_no], v_source,
                           CASE WHEN v_hooks = 3 THEN jsonb_build_object(p_order_no, jsonb_build_object(
                               'txn_no', p_txn, 'amount_cents', p_amount, 'currency', v_cur,
                               'channel', p_channel, 'outcome', v_outcome, 'operator', p_operator,
                               'reason', p_reason, 'charge_ref', p_charge, 'shop', v_shop,
                               'exception_id', v_exc_id, 'kind', CASE WHEN v_exc_id IS NOT NULL THEN 'overpaid' END,
                               'resolution', v_res)) END);
        END IF;
        RETURN QUERY SELECT v_outcome, 'paid'::text, v_outcome;
        RETURN;
    END IF;

    -- Lost (or amount or currency differs): read the current status under a share lock, so a
    -- pending order cannot be cancelled between this read and the exception we record for it.
    -- The coupon too, for the event.
    SELECT o.status, o.coupon_id, o.shop, o.currency INTO v_status, v_coupon, v_shop, v_ocur
      FROM orders o WHERE o.order_no = p_order_no FOR SHARE;
    IF v_status IS NULL THEN
        -- Archived orders are closed and never change: no lock needed.
        SELECT a.status, a.coupon_id, a.shop, a.currency INTO v_status, v_coupon, v_shop, v_ocur
          FROM archived_orders a WHERE a.order_no = p_order_no;
    END IF;

    IF v_status IS NULL THEN
        v_outcome := 'not_found';         v_kind := 'unknown_order';     v_res := 'manual_review';
    ELSIF v_ocur <> v_cur THEN
        v_outcome := 'currency_mismatch'; v_kind := 'currency_mismatch'; v_res := 'manual_review';
    ELSIF v_status = 'cancelled' THEN
        v_outcome := 'late_payment';      v_kind := 'late_payment';
    ELSIF v_status = 'paid' THEN
        v_outcome := 'double_payment';    v_kind := 'double_payment';
    ELSIF v_status = 'released' THEN
        -- A released order this payment could not pay: another amount (not allow_partial), or
        -- the order was archived before its payment came (archive() never touches it again).
        -- Money the shop is owed, not to be refunded blindly: reviewed.
        v_outcome := 'amount_mismatch';   v_kind := 'amount_mismatch';   v_res := 'manual_review';
    ELSE
        v_outcome := 'amount_mismatch';   v_kind := 'amount_mismatch';   v_res := 'manual_review';
    END IF;
    -- The order's coupon and lines go with the event: a refund reader knows what the money was for.
    SELECT e.o_id, e.o_resolution INTO v_exc_id, v_res
      FROM _payment_exception(p_order_no, v_kind, p_txn, p_amount, v_cur, v_res,
                              CASE WHEN v_kind = 'currency_mismatch'
                                   THEN format('payment %s via %s in %s, order in %s, order status %s',
                                               p_txn, p_channel, v_cur, v_ocur, v_status)
                                   ELSE format('payment %s via %s, order status %s', p_txn, p_channel,
                                               coalesce(v_status, 'unknown')) END,
                              p_channel, v_status, v_source, v_actor, v_coupon, v_shop) e;

    UPDATE payments p SET outcome = v_outcome WHERE p.ctid = v_pay;
    v_event := CASE WHEN v_outcome = 'late_payment' THEN 'late_payment' ELSE 'payment_exception' END;
    SELECT max(k.nargs) INTO v_hooks FROM hooks k WHERE k.event = v_event;
    IF v_hooks IS NOT NULL THEN
        PERFORM _hooks_run(v_event, ARRAY[p_order_no],
                           CASE WHEN v_outcome = 'late_payment' THEN 'payment_callback' ELSE v_source END,
                           CASE WHEN v_hooks = 3 THEN jsonb_build_object(p_order_no, jsonb_build_object(
                               'txn_no', p_txn, 'amount_cents', p_amount, 'currency', v_cur,
                               'channel', p_channel, 'outcome', v_outcome, 'operator', p_operator,
                               'reason', p_reason, 'charge_ref', p_charge, 'shop', v_shop,
                               'exception_id', v_exc_id, 'kind', v_kind, 'resolution', v_res,
                               'order_status', v_status)) END);
    END IF;
    RETURN QUERY SELECT v_outcome, v_status, v_outcome;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.claim_payment(text,text,bigint,text,text,text,text,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.claim_payment(text,text,bigint,text,text,text,text,text) IS
    'Applies a payment callback, idempotent by txn_no: paid, partial, or the exception a late, double, mismatched or excess payment needs';
