-- claim_reminder: sends an order's payment reminder at offset_seconds before its deadline, at
-- most once (the consumer when the reminder's message falls due, the scanner as the fallback).
-- The due time is expire_at - offset, computed here from the order as it is now, so a hold or a
-- deadline change needs no rewrite of the reminder (a shortened deadline only adds a message due
-- sooner, set_deadline's). Outcomes (due_at as noted):
--   sent          this call wrote the payment_reminder event (order_no, offset_seconds, due_at,
--                 expire_at, currency, amount_cents, shop); due_at = the due time it was sent
--                 against (the caller's lateness is its clock minus due_at)
--   not_due       still pending and due later: due_at = when; the caller re-schedules to it
--   in_flight     a payment is in flight: a hold is active (held_until ahead), a charge is
--                 pending within its bound (charge_until ahead), or another transaction holds the
--                 order row (a payment being claimed: skipped, never waited for). due_at = when to
--                 try again: the later of the hold's end and the charge's bound (a locked row: one
--                 second from now). When that is not before the order's deadline the reminder is
--                 given up (state skipped, reason in_flight) and due_at is NULL: the order is
--                 paid or cancelled by then.
--   not_pending   the order is no longer pending (paid, cancelled, released, archived) or the
--                 reminder was given up: nothing is ever sent for it
--   already_sent  sent before (by any caller); due_at = the due time it was sent against
--   not_found     no reminder at this offset for this order (none configured when it was
--                 placed, or already due then, or no such order)
-- Exactly once: the reminder row leaves pending in one conditional UPDATE, which a second caller
-- waits for and then finds sent. Never after a payment: the order row is share-locked before the
-- status is read, so a payment committed first is seen (not_pending), and a payment that comes
-- later waits for this transaction: the reminder's event is then written before the payment's.
-- Lock order as the gate's: the order row, then its reminder row.
CREATE OR REPLACE FUNCTION ordergate.claim_reminder(order_no text, offset_seconds int)
RETURNS TABLE (outcome text, due_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := claim_reminder.order_no;
    p_offset   int  := claim_reminder.offset_seconds;
    v_state    text;
    v_why      text;
    v_sent_due timestamptz;
    v_o        record;
    v_due      timestamptz;
    v_retry    timestamptz;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_reminder: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_offset IS NULL OR p_offset NOT BETWEEN 1 AND 31622400 THEN
        PERFORM _bad_arg('claim_reminder: offset_seconds must be 1..31622400');
    END IF;

    SELECT r.state, r.skip_reason, r.due_at INTO v_state, v_why, v_sent_due
      FROM reminders r
     WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset;
    IF NOT FOUND THEN
        SELECT r.state, r.skip_reason, r.due_at INTO v_state, v_why, v_sent_due
          FROM archived_reminders r
         WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not_found'::text, NULL::timestamptz;
        ELSIF v_state = 'sent' THEN
            RETURN QUERY SELECT 'already_sent'::text, v_sent_due;
        ELSE
            RETURN QUERY SELECT 'not_pending'::text, NULL::timestamptz;
        END IF;
        RETURN;
    END IF;
    IF v_state = 'sent' THEN
        RETURN QUERY SELECT 'already_sent'::text, v_sent_due;
        RETURN;
    ELSIF v_state = 'skipped' THEN
        RETURN QUERY SELECT 'not_pending'::text, NULL::timestamptz;
        RETURN;
    END IF;

    -- The order exists (the reminder's foreign key). A row another transaction holds (a payment,
    -- a cancel, a hold in its order service's transaction) is skipped, not waited for.
    SELECT o.status, o.expire_at, o.held_until, o.charge_until, o.currency, o.amount_cents, o.shop
      INTO v_o
      FROM orders o
     WHERE o.order_no = p_order_no
       FOR SHARE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'in_flight'::text, now() + interval '1 second';
        RETURN;
    END IF;

    IF v_o.status <> 'pending_payment' THEN
        UPDATE reminders r
           SET state = 'skipped', ended_at = now(), skip_reason = 'closed'
         WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset AND r.state = 'pending';
        IF NOT FOUND THEN
            -- Sent meanwhile (before the order closed: its event came first) or skipped.
            SELECT r.state, r.due_at INTO v_state, v_sent_due
              FROM reminders r
             WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset;
            IF v_state = 'sent' THEN
                RETURN QUERY SELECT 'already_sent'::text, v_sent_due;
                RETURN;
            END IF;
        END IF;
        RETURN QUERY SELECT 'not_pending'::text, NULL::timestamptz;
        RETURN;
    END IF;

    v_due := v_o.expire_at - make_interval(secs => p_offset);
    IF v_due > now() THEN
        RETURN QUERY SELECT 'not_due'::text, v_due;
        RETURN;
    END IF;

    IF v_o.held_until > now() OR v_o.charge_until > now() THEN
        v_retry := greatest(v_o.held_until, v_o.charge_until);
        IF v_retry < v_o.expire_at THEN
            RETURN QUERY SELECT 'in_flight'::text, v_retry;
            RETURN;
        END IF;
        UPDATE reminders r
           SET state = 'skipped', ended_at = now(), skip_reason = 'in_flight'
         WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset AND r.state = 'pending';
        IF NOT FOUND THEN
            SELECT r.state, r.due_at INTO v_state, v_sent_due
              FROM reminders r
             WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset;
            IF v_state = 'sent' THEN
                RETURN QUERY SELECT 'already_sent'::text, v_sent_due;
                RETURN;
            END IF;
        END IF;
        RETURN QUERY SELECT 'in_flight'::text, NULL::timestamptz;
        RETURN;
    END IF;

    UPDATE reminders r
       SET state = 'sent', due_at = v_due, sent_at = clock_timestamp(), ended_at = now()
     WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset AND r.state = 'pending';
    IF NOT FOUND THEN
        -- Another caller ended it first (this call waited for its row lock).
        SELECT r.state, r.due_at INTO v_state, v_sent_due
          FROM reminders r
         WHERE r.order_no = p_order_no AND r.offset_seconds = p_offset;
        IF v_state = 'sent' THEN
            RETURN QUERY SELECT 'already_sent'::text, v_sent_due;
        ELSE
            RETURN QUERY SELECT 'not_pending'::text, NULL::timestamptz;
        END IF;
        RETURN;
    END IF;
    INSERT INTO outbox (event_type, order_no, payload)
    VALUES ('payment_reminder', p_order_no,
            jsonb_build_object('v', 1, 'event', 'payment_reminder', 'order_no', p_order_no,
                               'offset_seconds', p_offset,
                               'due_at', to_char(v_due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                               'expire_at', to_char(v_o.expire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                               'currency', v_o.currency, 'amount_cents', v_o.amount_cents,
                               'shop', v_o.shop));
    RETURN QUERY SELECT 'sent'::text, v_due;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.claim_reminder(text,int) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.claim_reminder(text,integer) IS
    'Sends a pending order''s payment reminder at an offset once, when due and no payment is in flight';
