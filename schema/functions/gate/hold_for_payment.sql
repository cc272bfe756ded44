-- hold_for_payment: the user is on the payment page; push expire_at out so a cancel waits.
-- new expire_at = greatest(expire_at, least(now() + seconds, original_expire_at + max_hold_seconds)):
-- never shortens, never beyond the order's original expiry + max_hold_seconds.
-- seconds must be 1..least(max_hold_seconds, max_deadline_seconds), so a hold never sets a
-- deadline the cancel message cannot carry. Outcomes: held | not_pending | not_found.
-- A hold is not a transition: no status_log row, no transition event. With schedule_cancels = 1
-- an order keeps at most one cancel message waiting in the outbox (_cancel_reschedule): a hold
-- that moves expire_at rewrites the order's unpublished cancel_scheduled to the new deadline;
-- when one is published (or a relay is publishing it right now) due no later than the new
-- deadline, nothing is written, because the consumer answers that message not_due and
-- re-schedules it by the order's expire_at; only an order with no usable cancel message gets a
-- new one. 200 keep-alive holds are then at most two messages, not 201. The relay's row lock
-- is skipped, never waited for: a hold does not wait on a broker. held_until records the hold's own end (now() + seconds,
-- never earlier than a previous hold's): while it is ahead a payment is in flight, and
-- claim_reminder holds the order's reminders back (in_flight).
CREATE OR REPLACE FUNCTION ordergate.hold_for_payment(order_no text, seconds int)
RETURNS TABLE (outcome text, expire_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := hold_for_payment.order_no;
    p_seconds  int  := hold_for_payment.seconds;
    v_max      bigint := _setting_bigint('max_hold_seconds', 900);
    v_horizon  bigint := _setting_bigint('max_deadline_seconds', 31622400);
    v_expire   timestamptz;
    v_old      timestamptz;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('hold_for_payment: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_seconds IS NULL OR p_seconds < 1 OR p_seconds > least(v_max, v_horizon) THEN
        PERFORM _bad_arg(format('hold_for_payment: seconds must be 1..%s (max_hold_seconds, max_deadline_seconds)',
                                least(v_max, v_horizon)));
    END IF;

    -- The old deadline, under the lock the update takes anyway, to know whether it moved.
    SELECT o.expire_at INTO v_old
      FROM orders o
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
       FOR NO KEY UPDATE;

    UPDATE orders o
       SET expire_at = greatest(o.expire_at,
                                least(now() + make_interval(secs => p_seconds),
                                      o.original_expire_at + make_interval(secs => v_max))),
           held_until = greatest(o.held_until, now() + make_interval(secs => p_seconds))
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
    RETURNING o.expire_at INTO v_expire;
    IF FOUND THEN
        IF v_expire > v_old AND _setting_bigint('schedule_cancels', 0) = 1 THEN
            PERFORM _cancel_reschedule(p_order_no, v_expire);
        END IF;
        RETURN QUERY SELECT 'held'::text, v_expire;
        RETURN;
    END IF;

    SELECT o.expire_at INTO v_expire FROM orders o WHERE o.order_no = p_order_no;
    IF FOUND THEN
        RETURN QUERY SELECT 'not_pending'::text, v_expire;
    ELSE
        RETURN QUERY SELECT 'not_found'::text, NULL::timestamptz;
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.hold_for_payment(text,int) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.hold_for_payment(text,integer) IS
    'Pushes a pending order''s deadline out while its buyer is paying, within max_hold_seconds of the placed one';
