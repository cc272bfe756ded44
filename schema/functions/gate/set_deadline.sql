-- set_deadline: staff move a pending order's deadline, shorter or longer (the merchant changed
-- the payment window). Outcomes:
--   set          the order's expire_at is now deadline (expire_at = it)
--   not_pending  the order is closed (paid, cancelled, released; archived included): nothing
--                changed; expire_at = its deadline as it closed
--   not_found    no such order (expire_at NULL)
-- deadline (the new expire_at; the argument is not named expire_at, the result column is):
-- finite, at most now() + max_deadline_seconds (the horizon the cancel message can
-- carry, as place_order); a time in the past is allowed and makes the order due now: the
-- consumer (schedule_cancels = 1) or the scanner cancels it promptly. original_expire_at does
-- not move (holds stay bounded by the order as placed).
-- Logged in deadline_changes (operator, the deadline before and after); one outbox event
-- order_deadline_changed; the shop's hooks for event deadline_changed run last (_hooks_run,
-- context {operator, before, after}: the deadlines).
-- With schedule_cancels = 1 the cancel message follows the deadline, coalesced as
-- hold_for_payment's (_cancel_reschedule: one waiting message per order, rewritten to the new
-- due time, now for a deadline in the past; a new one only when none usable is waiting). A
-- shortened deadline still ahead also writes a reminder_scheduled message for each of the
-- order's pending reminders, due at the new expire_at - offset (now at the earliest): the old
-- message could come after the cancel. A lengthened one needs none (claim_reminder answers the
-- old message not_due and the consumer re-schedules it).
-- Lock: the order row (waits, like close_order), then the outbox rows.
-- Errors, nothing written: 22023 for a malformed order number, a NULL or infinite deadline or
-- one beyond the horizon, an operator outside 1..128 characters (trimmed).
CREATE OR REPLACE FUNCTION ordergate.set_deadline(order_no text, deadline timestamptz, operator text)
RETURNS TABLE (outcome text, expire_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text        := set_deadline.order_no;
    p_expire   timestamptz := set_deadline.deadline;
    p_operator text        := btrim(set_deadline.operator);
    v_horizon  bigint      := _setting_bigint('max_deadline_seconds', 31622400);
    v_old      timestamptz;
    v_shop     jsonb;
    v_cur      text;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('set_deadline: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_expire IS NULL OR NOT isfinite(p_expire) THEN
        PERFORM _bad_arg('set_deadline: deadline must be a finite timestamp');
    END IF;
    IF p_expire > now() + make_interval(secs => v_horizon) THEN
        PERFORM _bad_arg(format('set_deadline: deadline %s is more than max_deadline_seconds (%s s) from now',
                                p_expire, v_horizon));
    END IF;
    IF p_operator IS NULL OR length(p_operator) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('set_deadline: operator is required (1..128 characters)');
    END IF;

    -- The old deadline under the row lock the update needs anyway (a concurrent cancel or
    -- payment decides first; this call then finds the order closed).
    SELECT o.expire_at, o.shop, o.currency INTO v_old, v_shop, v_cur
      FROM orders o
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        SELECT o.expire_at INTO v_old FROM orders o WHERE o.order_no = p_order_no;
        IF NOT FOUND THEN
            SELECT a.expire_at INTO v_old FROM archived_orders a WHERE a.order_no = p_order_no;
        END IF;
        RETURN QUERY SELECT CASE WHEN FOUND THEN 'not_pending' ELSE 'not_found' END::text, v_old;
        RETURN;
    END IF;

    UPDATE orders o SET expire_at = p_expire WHERE o.order_no = p_order_no;
    INSERT INTO deadline_changes (order_no, operator, before, after)
    VALUES (p_order_no, p_operator, v_old, p_expire);

    IF _setting_bigint('schedule_cancels', 0) = 1 THEN
        -- A shortened deadline brings the pending reminders forward: each gets a message due
        -- at its new time (now at the earliest), earliest due first and before any new cancel
        -- message (place_order's order). Their old messages stay: claim_reminder answers them
        -- not_due or already_sent, so a second message is harmless. None for a deadline
        -- already past: the order is cancelled now, a reminder would only race the cancel.
        IF p_expire < v_old AND p_expire > now() THEN
            INSERT INTO outbox (event_type, order_no, payload)
            SELECT 'reminder_scheduled', p_order_no,
                   _reminder_message(p_order_no, r.offset_seconds,
                                     greatest(p_expire - make_interval(secs => r.offset_seconds), now()))
              FROM reminders r
             WHERE r.order_no = p_order_no
               AND r.state = 'pending'
             ORDER BY r.offset_seconds DESC;
        END IF;
        PERFORM _cancel_reschedule(p_order_no, greatest(p_expire, now()));
    END IF;

    INSERT INTO outbox (event_type, order_no, payload)
    VALUES ('order_deadline_changed', p_order_no,
            jsonb_build_object('v', 1, 'event', 'order_deadline_changed', 'order_no', p_order_no,
                               'source', 'manual', 'actor', p_operator,
                               'expire_at_before', v_old, 'expire_at', p_expire,
                               'shop', v_shop, 'changed_at', now(), 'currency', v_cur));
    PERFORM _hooks_run('deadline_changed', ARRAY[p_order_no], 'manual',
                       jsonb_build_object(p_order_no, jsonb_build_object('operator', p_operator,
                                                                         'before', v_old,
                                                                         'after', p_expire)));
    RETURN QUERY SELECT 'set'::text, p_expire;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.set_deadline(text,timestamptz,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.set_deadline(text,timestamp with time zone,text) IS
    'Moves a pending order''s deadline (staff), logged; with schedule_cancels the cancel message follows';
