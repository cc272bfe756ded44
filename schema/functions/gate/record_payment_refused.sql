-- record_payment_refused: the trace of a payment result the consumer dead-letters (it does not
-- decode, or claim_payment refuses it for good). The channel may have taken the money while the
-- books never saw the payment: without this row the order is cancelled on time and nobody
-- refunds. Called before the dead letter is produced and before the offset moves; a failure
-- leaves the message to be read again.
--
-- Writes one exception: kind 'refused_payment', resolution manual_review, state open, plus a
-- reconciliation_alert outbox event. Keyed by refused_key, so a redelivered message records
-- nothing twice:
--   'txn:' || p_txn_no   when the message carried a valid transaction number;
--   'msg:' || p_source || '#' || <sha256, hex, of p_order_no || E'\n' || p_message (NULL as '')>
--                        otherwise: the message's position (topic/partition/offset) and its
--                        content, so that once positions repeat (a topic re-created, a cluster
--                        migrated) a different message at the same position is recorded too,
--                        while the same message delivered again is not. The caller sends the
--                        message whole (only the note keeps a part of it).
-- A record keyed 'msg:' || p_source alone (written before the content was part of the key) whose
-- note is the one this call would write stands for this call: a redelivery across the change is
-- not recorded twice.
-- txn_no stays NULL on purpose: the same transaction may still arrive in a form claim_payment
-- accepts, and its own exception (one per txn_no) must not collide with this one.
--
--   p_source       where the message came from, 1..300 characters (topic/partition/offset)
--   p_order_no     the order number it names, when valid; NULL = none (stored as '')
--   p_txn_no       its transaction number, when valid; NULL = none
--   p_amount_cents its amount when > 0; NULL = none
--   p_reason       why it was refused, required; the first 500 characters are kept
--   p_message      the message as text (the caller escapes what is not printable), whole: all of
--                  it is in the key; the note keeps the first 2000 characters ('...' marks a cut)
-- Outcomes: 'recorded' (this call wrote the row) or 'duplicate' (the key was recorded before:
-- nothing written), with the exception's id and key. A bad argument is 22023 and writes nothing.
CREATE OR REPLACE FUNCTION ordergate.record_payment_refused(p_source text, p_order_no text,
                                                            p_txn_no text, p_amount_cents bigint,
                                                            p_reason text, p_message text)
RETURNS TABLE (outcome text, exception_id bigint, refused_key text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_key    text;
    v_reason text;
    v_note   text;
    v_id     bigint;
BEGIN
    IF p_source IS NULL OR length(p_source) NOT BETWEEN 1 AND 300 THEN
        PERFORM _bad_arg('record_payment_refused: source is required (1..300 characters)');
    END IF;
    IF p_order_no IS NOT NULL AND (length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$') THEN
        PERFORM _bad_arg('record_payment_refused: order_no must be NULL or 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_txn_no IS NOT NULL AND (length(p_txn_no) > 128 OR p_txn_no !~ '^[A-Za-z0-9._:-]+$') THEN
        PERFORM _bad_arg('record_payment_refused: txn_no must be NULL or 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount_cents IS NOT NULL AND p_amount_cents <= 0 THEN
        PERFORM _bad_arg('record_payment_refused: amount_cents must be NULL or > 0');
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        PERFORM _bad_arg('record_payment_refused: reason is required');
    END IF;

    v_reason := left(btrim(p_reason), 500);
    v_note := format('payment result refused by the consumer (%s) from %s; txn %s; message: %s',
                     v_reason, p_source, coalesce(p_txn_no, 'unknown'),
                     CASE WHEN p_message IS NULL THEN '(none)'
                          WHEN length(p_message) > 2000 THEN left(p_message, 2000) || '...'
                          ELSE p_message END);
    IF p_txn_no IS NOT NULL THEN
        v_key := 'txn:' || p_txn_no;
    ELSE
        v_key := 'msg:' || p_source || '#'
                 || encode(sha256(convert_to(coalesce(p_order_no, '') || E'\n'
                                             || coalesce(p_message, ''), 'UTF8')), 'hex');
        SELECT x.id INTO v_id FROM exceptions x
         WHERE x.refused_key = 'msg:' || p_source AND x.note = v_note;
        IF v_id IS NOT NULL THEN
            RETURN QUERY SELECT 'duplicate'::text, v_id, 'msg:' || p_source;
            RETURN;
        END IF;
    END IF;

    -- Concurrent deliveries of one key (a rebalance) serialize on the unique index: the second
    -- waits for the first and then finds its row.
    INSERT INTO exceptions AS x (order_no, kind, txn_no, amount_cents, resolution, note, refused_key)
    VALUES (coalesce(p_order_no, ''), 'refused_payment', NULL, p_amount_cents, 'manual_review',
            v_note, v_key)
    ON CONFLICT (refused_key) WHERE refused_key IS NOT NULL DO NOTHING
    RETURNING x.id INTO v_id;

    IF v_id IS NULL THEN
        SELECT x.id INTO v_id FROM exceptions x WHERE x.refused_key = v_key;
        RETURN QUERY SELECT 'duplicate'::text, v_id, v_key;
        RETURN;
    END IF;

    INSERT INTO outbox (event_type, order_no, payload)
    VALUES ('reconciliation_alert', coalesce(p_order_no, ''),
            jsonb_build_object('v', 1, 'event', 'reconciliation_alert',
                               'order_no', p_order_no, 'txn_no', p_txn_no,
                               'amount_cents', p_amount_cents, 'kind', 'refused_payment',
                               'resolution', 'manual_review', 'exception_id', v_id,
                               'reason', v_reason, 'source', p_source));
    RETURN QUERY SELECT 'recorded'::text, v_id, v_key;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.record_payment_refused(text,text,text,bigint,text,text) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.record_payment_refused(text,text,text,bigint,text,text) IS
    'Records a payment result the consumer dead-letters as a refused_payment exception, once per message';
