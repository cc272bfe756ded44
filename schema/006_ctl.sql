-- 006_ctl.sql: read functions for the operator's CLI (ordergatectl show, exceptions).
--
-- Reads only: nothing here changes an order. Resolving an exception is ordergate.resolve_exception
-- in 002_gate.sql. Every function: SECURITY DEFINER owned by ordergate_owner, pinned search_path,
-- one round trip, EXECUTE granted to ordergate_service only. Timestamps in the JSON are text in
-- the message contract's format ("2026-11-30T16:00:00.000Z", UTC, milliseconds), whatever the
-- caller's TimeZone and DateStyle are.

BEGIN;

DO $guard$
BEGIN
    IF to_regclass('ordergate.schema_migrations') IS NULL THEN
        RAISE EXCEPTION 'ordergate migration 001 must be applied before 006' USING ERRCODE = 'OG000';
    END IF;
    IF EXISTS (SELECT 1 FROM ordergate.schema_migrations WHERE version = '006') THEN
        RAISE EXCEPTION 'ordergate migration 006 is already applied' USING ERRCODE = 'OG000';
    END IF;
END
$guard$;

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

-- Internal: a timestamp as contract text (NULL stays NULL). Not granted to anyone.
CREATE FUNCTION ordergate._ctl_iso(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

------------------------------------------------------------------------------------------------
-- order_report: everything recorded under one order number, as one JSON document read in one
-- snapshot (one statement), so the parts agree with each other:
--   {"order_no", "found", "status", "amount_cents", "coupon_id", "expire_at",
--    "original_expire_at", "created_at", "closed_at",
--    "items":      [{"sku", "qty"}]                                            by sku,
--    "history":    [{"id", "from_status", "to_status", "source", "idempotency_key", "actor",
--                    "note", "at"}]                                            oldest first,
--    "payments":   [{"txn_no", "amount_cents", "channel", "outcome", "at"}]    oldest first,
--    "exceptions": [{"id", "kind", "txn_no", "amount_cents", "resolution", "state", "note",
--                    "created_at", "resolved_at", "resolved_by"}]              oldest first}
-- found = false with the order fields NULL when no order row exists (payments and exceptions of
-- an unknown order are still reported). NULL when nothing at all is recorded under the number.
CREATE FUNCTION ordergate.order_report(p_order_no text) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    WITH o AS (
        SELECT o.* FROM ordergate.orders o WHERE o.order_no = p_order_no
    ), items AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object('sku', it.sku, 'qty', it.qty)
                                  ORDER BY it.sku), '[]'::jsonb) AS j
          FROM ordergate.order_items it
         WHERE it.order_no = p_order_no
    ), history AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', s.id, 'from_status', s.from_status, 'to_status', s.to_status,
                   'source', s.source, 'idempotency_key', s.idempotency_key, 'actor', s.actor,
                   'note', s.note, 'at', _ctl_iso(s.created_at))
                   ORDER BY s.created_at, s.id), '[]'::jsonb) AS j
          FROM ordergate.status_log s
         WHERE s.order_no = p_order_no
    ), payments AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'txn_no', p.txn_no, 'amount_cents', p.amount_cents, 'channel', p.channel,
                   'outcome', p.outcome, 'at', _ctl_iso(p.created_at))
                   ORDER BY p.created_at, p.txn_no), '[]'::jsonb) AS j
          FROM ordergate.payments p
         WHERE p.order_no = p_order_no
    ), exceptions AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', e.id, 'kind', e.kind, 'txn_no', e.txn_no, 'amount_cents', e.amount_cents,
                   'resolution', e.resolution, 'state', e.state, 'note', e.note,
                   'created_at', _ctl_iso(e.created_at), 'resolved_at', _ctl_iso(e.resolved_at),
                   'resolved_by', e.resolved_by)
                   ORDER BY e.created_at, e.id), '[]'::jsonb) AS j
          FROM ordergate.exceptions e
         WHERE e.order_no = p_order_no
    )
    SELECT CASE
               WHEN NOT EXISTS (SELECT 1 FROM o)
                    AND payments.j = '[]'::jsonb AND exceptions.j = '[]'::jsonb
                    AND history.j = '[]'::jsonb
               THEN NULL
               ELSE jsonb_build_object(
                   'order_no', p_order_no,
                   'found', EXISTS (SELECT 1 FROM o),
                   'status', (SELECT o.status FROM o),
                   'amount_cents', (SELECT o.amount_cents FROM o),
                   'coupon_id', (SELECT o.coupon_id FROM o),
                   'expire_at', (SELECT _ctl_iso(o.expire_at) FROM o),
                   'original_expire_at', (SELECT _ctl_iso(o.original_expire_at) FROM o),
                   'created_at', (SELECT _ctl_iso(o.created_at) FROM o),
                   'closed_at', (SELECT _ctl_iso(o.closed_at) FROM o),
                   'items', items.j,
                   'history', history.j,
                   'payments', payments.j,
                   'exceptions', exceptions.j)
           END
      FROM items, history, payments, exceptions
$$;

------------------------------------------------------------------------------------------------
-- exception_list: the follow-up queue, newest first. p_state: 'open' | 'resolved' | 'all'.
-- p_limit 1..10000. total = how many rows match before the limit (the same on every row), so a
-- caller can say "showing 50 of 312".
CREATE FUNCTION ordergate.exception_list(p_state text, p_limit int)
RETURNS TABLE (id bigint, order_no text, kind text, txn_no text, amount_cents bigint,
               resolution text, state text, note text, created_at text, resolved_at text,
               resolved_by text, total bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_state IS NULL OR p_state NOT IN ('open', 'resolved', 'all') THEN
        RAISE EXCEPTION 'exception_list: state must be open, resolved or all' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'exception_list: limit must be 1..10000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT e.id, e.order_no, e.kind, e.txn_no, e.amount_cents, e.resolution, e.state, e.note,
           _ctl_iso(e.created_at), _ctl_iso(e.resolved_at), e.resolved_by,
           count(*) OVER ()
      FROM exceptions e
     WHERE p_state = 'all' OR e.state = p_state
     ORDER BY e.created_at DESC, e.id DESC
     LIMIT p_limit;
END
$$;

------------------------------------------------------------------------------------------------
-- Privileges.

REVOKE EXECUTE ON FUNCTION
    ordergate._ctl_iso(timestamptz),
    ordergate.order_report(text),
    ordergate.exception_list(text, int)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    ordergate.order_report(text),
    ordergate.exception_list(text, int)
TO ordergate_service;

INSERT INTO ordergate.schema_migrations (version) VALUES ('006');

COMMIT;
