-- _reminder_message: a reminder's message for the delay topics (docs/consumer.md, "Messages"):
-- the cancel message's fields plus "kind":"reminder" and "offset_seconds", so that the relay
-- routes it and the consumer waits for it exactly as for a cancel, then claims it with
-- claim_reminder. due_at as _cancel_message writes it (UTC, to the microsecond).
CREATE OR REPLACE FUNCTION ordergate._reminder_message(p_order_no text, p_offset int, p_due timestamptz)
RETURNS json
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT json_build_object('v', 1, 'order_no', p_order_no,
                             'due_at', to_char(p_due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                             'kind', 'reminder', 'offset_seconds', p_offset)
$$;
COMMENT ON FUNCTION ordergate._reminder_message(text,integer,timestamp with time zone) IS
    'Internal: the delay-topic message of an order''s reminder at p_offset seconds, due at p_due';
