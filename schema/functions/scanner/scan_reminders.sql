-- scan_reminders: the scanner's fallback for reminders whose message never came (schedule_cancels
-- = 0, a lost or late message): up to p_limit pending reminders of pending orders due before
-- now() - p_grace, oldest due first, for the scanner to claim with claim_reminder. A reminder
-- held back by a payment in flight (claim_reminder's in_flight) is left out while the claim would
-- only answer in_flight again; one the claim would give up is returned. Claiming what a page
-- returns takes it out of the next page (sent or skipped), so the scanner pages until a page is
-- short; the page is bounded, never the backlog.
-- Driven by the pending orders' partial index (orders_overdue_idx) over expire_at up to the
-- largest offset of reminder_before_seconds ahead, then the reminders by primary key: closed
-- orders, whose unsent reminders stay pending until archived, are never read. A reminder of an
-- offset larger than any the setting lists now is left to its message.
CREATE OR REPLACE FUNCTION ordergate.scan_reminders(p_grace interval, p_limit int)
RETURNS TABLE (order_no text, offset_seconds int, due_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_cutoff timestamptz;
    v_max    int;
BEGIN
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        PERFORM _bad_arg('scan_reminders: p_grace must be a non-negative interval');
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('scan_reminders: p_limit must be 1..10000');
    END IF;
    SELECT max(x::int) INTO v_max
      FROM settings s, unnest(string_to_array(s.value, ',')) AS x
     WHERE s.key = 'reminder_before_seconds';
    IF v_max IS NULL THEN
        RETURN;
    END IF;
    v_cutoff := now() - p_grace;
    RETURN QUERY
    SELECT o.order_no, r.offset_seconds, o.expire_at - make_interval(secs => r.offset_seconds)
      FROM orders o
      JOIN reminders r ON r.order_no = o.order_no
     WHERE o.status = 'pending_payment'
       AND o.expire_at < v_cutoff + make_interval(secs => v_max)
       AND r.state = 'pending'
       AND o.expire_at - make_interval(secs => r.offset_seconds) < v_cutoff
       AND (NOT (coalesce(o.held_until > now(), false) OR coalesce(o.charge_until > now(), false))
            OR greatest(o.held_until, o.charge_until) >= o.expire_at)
     ORDER BY 3, 1, 2
     LIMIT p_limit;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scan_reminders(interval,int) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scan_reminders(interval,integer) IS
    'A bounded page of overdue unsent reminders of pending orders, for the scanner''s fallback';
