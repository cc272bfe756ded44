-- 005_consumer.sql: what ordergate-consumer reads besides the gate.
--
-- due_times: when claim_cancel answers not_due, the database has moved the order's expire_at
-- (a payment hold) after the delayed message was scheduled. The consumer then schedules a new
-- delayed message for the database's due time before it lets the old one go; this function tells
-- it that time. Read-only, one round trip for a whole batch.
--
-- Same rules as the gate: SECURITY DEFINER owned by ordergate_owner, pinned search_path, EXECUTE
-- revoked from PUBLIC and granted to ordergate_service. Bad arguments raise SQLSTATE 22023.

BEGIN;

DO $guard$
BEGIN
    IF to_regclass('ordergate.schema_migrations') IS NULL THEN
        RAISE EXCEPTION 'ordergate migration 001 must be applied before 005' USING ERRCODE = 'OG000';
    END IF;
    IF EXISTS (SELECT 1 FROM ordergate.schema_migrations WHERE version = '005') THEN
        RAISE EXCEPTION 'ordergate migration 005 is already applied' USING ERRCODE = 'OG000';
    END IF;
END
$guard$;

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

-- One row per distinct order number of the array that is still pending_payment, with its current
-- expire_at. Orders that are paid, cancelled or unknown have no row: nothing is left to schedule
-- for them. At most 10000 order numbers per call (the gate's batch limit).
CREATE FUNCTION ordergate.due_times(p_order_nos text[])
RETURNS TABLE (order_no text, expire_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_order_nos IS NULL THEN
        RAISE EXCEPTION 'due_times: order numbers must not be NULL' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_order_nos) > 10000 THEN
        RAISE EXCEPTION 'due_times: at most 10000 order numbers per call, got %',
            cardinality(p_order_nos) USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT o.order_no, o.expire_at
      FROM ordergate.orders o
     WHERE o.order_no = ANY (p_order_nos)
       AND o.status = 'pending_payment';
END
$$;

REVOKE ALL ON FUNCTION ordergate.due_times(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ordergate.due_times(text[]) TO ordergate_service;

INSERT INTO ordergate.schema_migrations (version) VALUES ('005');

COMMIT;
