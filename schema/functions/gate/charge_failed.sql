-- charge_failed: the payment provider reports that a charge begun with begin_charge failed.
-- Outcomes:
--   failed            this call ended the charge (state failed); the order's charge_until is
--                     recomputed from its other pending charges
--   duplicate         the charge had failed before: nothing changes
--   already_captured  claim_payment captured it: nothing changes
-- 22023 and nothing written: a malformed order_no or charge_ref, a charge_ref never begun, or one
-- of another order.
--
-- When this call ends the last charge that protected a pending order whose deadline has passed,
-- the order is due now: with schedule_cancels = 1 this transaction writes a cancel_scheduled
-- event due now (as place_order schedules), which the relay publishes to the shortest delay
-- topic and the consumer claims at once; otherwise, and as the fallback, the scanner's next run
-- cancels it. A failure reported after the order closed is recorded (ended_late) and changes
-- nothing else. Of an archived order: answered from the archive, nothing written.
-- Lock order: the order row, then the charge (_charge_end).
CREATE OR REPLACE FUNCTION ordergate.charge_failed(order_no text, charge_ref text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := charge_failed.order_no;
    p_ref      text := charge_failed.charge_ref;
    v_owner    text;
    v_state    text;
    v_end      record;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('charge_failed: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_ref IS NULL OR length(p_ref) > 128 OR p_ref !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('charge_failed: charge_ref must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    -- A reference names one order forever, so reading it before the locks is safe.
    SELECT c.order_no, c.state INTO v_owner, v_state
      FROM (SELECT h.order_no, h.state FROM charges h WHERE h.charge_ref = p_ref
            UNION ALL
            SELECT a.order_no, a.state FROM archived_charges a WHERE a.charge_ref = p_ref) c;
    IF NOT FOUND THEN
        PERFORM _bad_arg(format('charge_failed: no charge %s was begun', p_ref));
    END IF;
    IF v_owner <> p_order_no THEN
        PERFORM _bad_arg(format('charge_failed: charge_ref %s belongs to another order', p_ref));
    END IF;

    SELECT * INTO v_end FROM _charge_end(p_order_no, p_ref, 'failed', NULL);
    v_state := coalesce(v_end.o_prev, v_state);
    IF v_end.o_due AND _setting_bigint('schedule_cancels', 0) = 1 THEN
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('cancel_scheduled', p_order_no, _cancel_message(p_order_no, now()));
    END IF;
    RETURN CASE v_state WHEN 'pending' THEN 'failed'
                        WHEN 'failed' THEN 'duplicate'
                        ELSE 'already_captured' END;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.charge_failed(text,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.charge_failed(text,text) IS
    'Ends a pending charge as failed; an order it no longer protects past its deadline is cancelled promptly';
