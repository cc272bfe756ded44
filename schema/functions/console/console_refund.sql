-- console_refund: an operator decides a refund the gate left to a person (a late or double
-- payment above the refund limit, under manual review). p_decision:
--   approve  the exception becomes an auto_refund and a refund_requested event (source console,
--            actor the login) asks the payment side to return the money; it stays open until
--            record_refund reports the result. Outcome requested.
--   decline  the exception is resolved (resolve_exception) with "refund declined: NOTE".
--            Outcome declined.
-- Either: not_found (no such exception), not_open (resolved or refunded already),
-- not_refundable (another kind, or a refund was requested before). The note is required
-- (1..2000 characters); every call is audited. Lock: the exception row.
CREATE OR REPLACE FUNCTION ordergate.console_refund(p_id bigint, p_decision text, p_note text)
RETURNS TABLE (outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_exc exceptions%ROWTYPE;
    v_out text;
    v_pay payments%ROWTYPE;
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('console_refund: id is required');
    END IF;
    IF p_decision IS NULL OR p_decision NOT IN ('approve', 'decline') THEN
        PERFORM _bad_arg('console_refund: decision must be approve or decline');
    END IF;
    IF p_note IS NULL OR length(btrim(p_note)) NOT BETWEEN 1 AND 2000 THEN
        PERFORM _bad_arg('console_refund: a note is required (1..2000 characters)');
    END IF;
    SELECT e.* INTO v_exc FROM exceptions e WHERE e.id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        v_out := 'not_found';
    ELSIF v_exc.state <> 'open' THEN
        v_out := 'not_open';
    ELSIF v_exc.kind NOT IN ('late_payment', 'double_payment') OR v_exc.resolution <> 'manual_review'
          OR EXISTS (SELECT 1 FROM refunds r WHERE r.exception_id = v_exc.id) THEN
        v_out := 'not_refundable';
    ELSIF p_decision = 'decline' THEN
        PERFORM resolve_exception(p_id, session_user, 'refund declined: ' || btrim(p_note));
        v_out := 'declined';
    ELSE
        SELECT p.* INTO v_pay FROM payments p WHERE p.txn_no = v_exc.txn_no;
        UPDATE exceptions e
           SET resolution = 'auto_refund',
               note = concat_ws(E'\n', e.note,
                                format('refund approved by %s: %s', session_user, btrim(p_note)))
         WHERE e.id = p_id;
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('refund_requested', v_exc.order_no,
                jsonb_build_object('v', 1, 'event', 'refund_requested',
                                   'order_no', v_exc.order_no, 'txn_no', v_exc.txn_no,
                                   'amount_cents', v_exc.amount_cents, 'channel', v_pay.channel,
                                   'kind', v_exc.kind, 'resolution', 'auto_refund',
                                   'exception_id', v_exc.id,
                                   'order_status', (SELECT o.status FROM orders o
                                                     WHERE o.order_no = v_exc.order_no),
                                   'source', 'console', 'actor', session_user::text,
                                   'currency', v_exc.currency));
        v_out := 'requested';
    END IF;
    PERFORM _console_audit('refund_' || p_decision, p_id::text, v_out,
                           jsonb_build_object('note', btrim(p_note)));
    RETURN QUERY SELECT v_out;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_refund(bigint,text,text) TO ordergate_console_operator;
COMMENT ON FUNCTION ordergate.console_refund(bigint,text,text) IS
    'Approves (refund_requested event) or declines a refund left to manual review';
