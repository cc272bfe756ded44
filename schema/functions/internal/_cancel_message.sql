-- _cancel_message: the cancel message of the consumer's contract (docs/consumer.md, "Messages"),
-- {"v":1,"order_no":...,"due_at":...}, for an order due at p_due. due_at is UTC to the
-- microsecond, expire_at's own precision: a due time rounded to the millisecond could be up to
-- 1 ms before the database's deadline and be claimed too early (not_due).
CREATE OR REPLACE FUNCTION ordergate._cancel_message(p_order_no text, p_due timestamptz)
RETURNS json
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT json_build_object('v', 1, 'order_no', p_order_no,
                             'due_at', to_char(p_due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;
COMMENT ON FUNCTION ordergate._cancel_message(text,timestamp with time zone) IS
    'Internal: the cancel message of an order due at p_due, as the consumer reads it';
