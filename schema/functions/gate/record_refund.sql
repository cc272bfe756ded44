-- record_refund: the payment side reports what became of a refund that ordergate requested
-- (outbox refund_requested, for a late or double payment within auto_refund_limit_cents).
-- Idempotent by refund_ref. outcome: succeeded | failed. Returns (result, exception_id, state,
-- resolution): what the call did, then the exception as it is after the call:
--   refunded          succeeded: the exception is now state 'refunded' (closed)
--   manual_review     failed: the exception stays open with resolution 'manual_review', and a
--                     reconciliation_alert event asks an operator to act
--   duplicate         this refund_ref was recorded before with this txn_no and outcome: nothing changes
--   conflict          this refund_ref was recorded before with another txn_no or outcome: nothing changes
--   already_refunded  another refund of this payment succeeded before: nothing changes (a
--                     second success would be money returned twice: check with the provider)
--   not_requested     the payment exists but no refund was requested for it (its exception is
--                     a manual review from the start, or it has none): nothing changes
--   not_found         no payment with this txn_no: nothing changes
-- A refund that failed and was retried successfully under another refund_ref ends 'refunded'.
--
-- Archived history (ordergate.archive) answers as the hot tables do: the exception, its refunds,
-- the payment and refund_ref are looked up in the archived_* tables too, so a repeated report
-- is still a duplicate, a second success still already_refunded. A new result for an archived
-- exception (closed before the provider answered: archive() never moves an open one) does not
-- rewrite the archive: the refund is recorded in archived_refunds, a reconciliation_alert of
-- kind refund_after_archive asks an operator to check it, and the result is manual_review with
-- the archived exception's state and resolution.
-- A result recorded (refunded, or manual_review after a failure or after archive) runs the
-- shop's 'refund_result' hooks last, inside this transaction, for the exception's order, source
-- 'refund_result'; their context (three-argument hooks): txn_no, refund_ref, outcome, result,
-- exception_id, kind, amount_cents, currency, actor (schema/README.md, "Effect hooks"). The
-- answers that record nothing run no hook.
-- Lock order: the exception row (payments are not locked: the exception is created with the
-- payment and never goes away; hot first, then archived, the direction archive() moves it),
-- then the refunds row (its primary key).
CREATE OR REPLACE FUNCTION ordergate.record_refund(txn_no text, refund_ref text, outcome text)
RETURNS TABLE (result text, exception_id bigint, state text, resolution text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_txn     text := record_refund.txn_no;
    p_ref     text := record_refund.refund_ref;
    p_outcome text := record_refund.outcome;
    v_exc     exceptions%ROWTYPE;
    v_prev    refunds%ROWTYPE;
    v_tried   boolean;
    v_archived boolean := false;
    v_result  text;
    v_hooks   smallint;
BEGIN
    IF p_txn IS NULL OR length(p_txn) > 128 OR p_txn !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('record_refund: txn_no must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_ref IS NULL OR length(p_ref) > 128 OR p_ref !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('record_refund: refund_ref must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed') THEN
        PERFORM _bad_arg(format('record_refund: outcome must be succeeded or failed, not %L', p_outcome));
    END IF;

    SELECT e.* INTO v_exc FROM exceptions e WHERE e.txn_no = p_txn FOR UPDATE;
    IF NOT FOUND THEN
        -- Archived since (or being archived: the lock above waited for the batch that deleted
        -- the row, and this newer statement sees where it went). Archived rows never change, so
        -- the row is locked only to serialize reports of this exception.
        SELECT x.id, x.order_no, x.kind, x.txn_no, x.amount_cents, x.resolution, x.state, x.note,
               x.created_at, x.resolved_at, x.resolved_by, x.refused_key
          INTO v_exc.id, v_exc.order_no, v_exc.kind, v_exc.txn_no, v_exc.amount_cents,
               v_exc.resolution, v_exc.state, v_exc.note, v_exc.created_at, v_exc.resolved_at,
               v_exc.resolved_by, v_exc.refused_key, v_exc.currency
          FROM archived_exceptions x WHERE x.txn_no = p_txn
         ORDER BY x.id LIMIT 1
           FOR UPDATE;
        v_archived := FOUND;
    END IF;
    IF v_exc.id IS NULL THEN
        RETURN QUERY SELECT CASE WHEN EXISTS (SELECT 1 FROM payments p WHERE p.txn_no = p_txn)
                                   OR EXISTS (SELECT 1 FROM archived_payments p WHERE p.txn_no = p_txn)
                                 THEN 'not_requested' ELSE 'not_found' END::text,
                            NULL::bigint, NULL::text, NULL::text;
        RETURN;
    END IF;

    -- Under the exception's lock: a concurrent report of the same refund_ref waits here and then
    -- sees this one's row. A reference is unique across hot and archived refunds.
    SELECT r.* INTO v_prev FROM refunds r WHERE r.refund_ref = p_ref;
    IF NOT FOUND THEN
        SELECT r.refund_ref, r.txn_no, r.exception_id, r.outcome, r.actor, r.recorded_at
          INTO v_prev.refund_ref, v_prev.txn_no, v_prev.exception_id, v_prev.outcome,
               v_prev.actor, v_prev.recorded_at
          FROM archived_refunds r WHERE r.refund_ref = p_ref;
    END IF;
    IF v_prev.refund_ref IS NOT NULL THEN
        RETURN QUERY SELECT CASE WHEN v_prev.txn_no = p_txn AND v_prev.outcome = p_outcome
                                 THEN 'duplicate' ELSE 'conflict' END::text,
                            v_exc.id, v_exc.state, v_exc.resolution;
        RETURN;
    END IF;

    -- A refund was requested: the exception began as an auto_refund, or a refund of it was
    -- reported before (a failure turns it into a manual review, and a retry may still succeed).
    -- An archived exception's refunds may be in either table (one recorded after it moved).
    v_tried := EXISTS (SELECT 1 FROM refunds r WHERE r.exception_id = v_exc.id)
               OR (v_archived AND EXISTS (SELECT 1 FROM archived_refunds r WHERE r.exception_id = v_exc.id));
    IF v_exc.kind NOT IN ('late_payment', 'double_payment')
       OR NOT (v_exc.resolution = 'auto_refund' OR v_tried) THEN
        RETURN QUERY SELECT 'not_requested'::text, v_exc.id, v_exc.state, v_exc.resolution;
        RETURN;
    END IF;
    IF v_exc.state = 'refunded'
       OR (v_archived AND EXISTS (SELECT 1 FROM archived_refunds r
                                   WHERE r.exception_id = v_exc.id AND r.outcome = 'succeeded')) THEN
        RETURN QUERY SELECT 'already_refunded'::text, v_exc.id, v_exc.state, v_exc.resolution;
        RETURN;
    END IF;

    IF v_archived THEN
        -- A new result for an exception that was closed (resolved by an operator) and archived
        -- before the provider answered. The archive is never rewritten: the result is recorded
        -- beside the exception in archived_refunds (so a repeat is a duplicate and a second
        -- success already_refunded) and an operator is asked to check it against what the
        -- resolution did (a success may be money returned twice).
        INSERT INTO archived_refunds (refund_ref, txn_no, exception_id, outcome, actor, recorded_at)
        VALUES (p_ref, p_txn, v_exc.id, p_outcome, _actor(), now());
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('reconciliation_alert', v_exc.order_no,
                jsonb_build_object('v', 1, 'event', 'reconciliation_alert', 'order_no', v_exc.order_no,
                                   'txn_no', p_txn, 'amount_cents', v_exc.amount_cents,
                                   'kind', 'refund_after_archive', 'refund_ref', p_ref,
                                   'outcome', p_outcome, 'resolution', 'manual_review',
                                   'exception_id', v_exc.id, 'exception_state', v_exc.state,
                                   'source', 'refund_result', 'actor', _actor()));
        v_result := 'manual_review';
    ELSE
        INSERT INTO refunds (refund_ref, txn_no, exception_id, outcome)
        VALUES (p_ref, p_txn, v_exc.id, p_outcome);
        IF p_outcome = 'succeeded' THEN
            UPDATE exceptions e
               SET state = 'refunded', resolved_at = now(), resolved_by = _actor(),
                   note = concat_ws(E'\n', e.note, format('refund %s succeeded', p_ref))
             WHERE e.id = v_exc.id
            RETURNING e.* INTO v_exc;
            v_result := 'refunded';
        ELSE
            UPDATE exceptions e
               SET resolution = 'manual_review',
                   note = concat_ws(E'\n', e.note, format('refund %s failed', p_ref))
             WHERE e.id = v_exc.id
            RETURNING e.* INTO v_exc;
            INSERT INTO outbox (event_type, order_no, payload)
            VALUES ('reconciliation_alert', v_exc.order_no,
                    jsonb_build_object('v', 1, 'event', 'reconciliation_alert', 'order_no', v_exc.order_no,
                                       'txn_no', p_txn, 'amount_cents', v_exc.amount_cents,
                                       'kind', 'refund_failed', 'refund_ref', p_ref,
                                       'resolution', 'manual_review', 'exception_id', v_exc.id,
                                       'source', 'refund_result', 'actor', _actor()));
            v_result := 'manual_review';
        END IF;
    END IF;

    -- No hook for the event: no call; two-argument ones only: no context built.
    SELECT max(k.nargs) INTO v_hooks FROM hooks k WHERE k.event = 'refund_result';
    IF v_hooks IS NOT NULL THEN
        PERFORM _hooks_run('refund_result', ARRAY[v_exc.order_no], 'refund_result',
                           CASE WHEN v_hooks = 3 THEN jsonb_build_object(v_exc.order_no, jsonb_build_object(
                               'txn_no', p_txn, 'refund_ref', p_ref, 'outcome', p_outcome,
                               'result', v_result, 'exception_id', v_exc.id, 'kind', v_exc.kind,
                               'amount_cents', v_exc.amount_cents, 'currency', v_exc.currency,
                               'actor', _actor())) END);
    END IF;
    RETURN QUERY SELECT v_result, v_exc.id, v_exc.state, v_exc.resolution;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.record_refund(text,text,text) TO ordergate_refunds;
COMMENT ON FUNCTION ordergate.record_refund(text,text,text) IS
    'Records what became of a refund ordergate requested, idempotent by refund reference';
