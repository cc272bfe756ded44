-- _cancel_reschedule: the order's cancel message follows a deadline that moved (hold_for_payment,
-- set_deadline; only with schedule_cancels = 1, which the caller checks). Keeps at most one
-- cancel message waiting in the outbox per order:
--   - the order's newest unpublished, unquarantined cancel_scheduled is rewritten to p_due;
--   - when none is waiting (or the relay holds its row right now: the lock is skipped, never
--     waited for) and no unquarantined one, published or not, is due by p_due, a new one is
--     written; a message due no later than p_due is enough, because the consumer answers it
--     not_due and re-schedules it by the order's expire_at.
-- Contract: the caller holds the order row (FOR NO KEY UPDATE) and has already set expire_at, so
-- concurrent callers for one order are serialized; p_due is the time the message must carry
-- (the new deadline, or now() for one in the past). Writes only outbox rows of this order.
CREATE OR REPLACE FUNCTION ordergate._cancel_reschedule(p_order_no text, p_due timestamptz)
RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    UPDATE outbox b
       SET payload = _cancel_message(p_order_no, p_due)
     WHERE b.id = (SELECT q.id
                     FROM outbox q
                    WHERE q.order_no = p_order_no
                      AND q.event_type = 'cancel_scheduled'
                      AND q.published_at IS NULL
                      AND q.quarantined_at IS NULL
                    ORDER BY q.id DESC
                    LIMIT 1
                      FOR UPDATE SKIP LOCKED);
    IF NOT FOUND AND NOT EXISTS (
           SELECT 1
             FROM outbox q
            WHERE q.order_no = p_order_no
              AND q.event_type = 'cancel_scheduled'
              AND q.quarantined_at IS NULL
              AND (q.payload ->> 'due_at')::timestamptz <= p_due) THEN
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('cancel_scheduled', p_order_no, _cancel_message(p_order_no, p_due));
    END IF;
END
$$;
COMMENT ON FUNCTION ordergate._cancel_reschedule(text,timestamp with time zone) IS
    'Internal: rewrites or writes an order''s one waiting cancel message for a deadline that moved';
