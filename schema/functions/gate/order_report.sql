-- order_report: everything recorded under one order number, as one JSON document read in one
-- snapshot (one statement), so the parts agree with each other:
--   {"order_no", "found", "status", "amount_cents", "coupon_id", "expire_at",
--    "original_expire_at", "created_at", "closed_at",
--    "currency", "allow_partial", "captured_cents"     (amounts in minor units of currency),
--    "items":      [{"sku", "qty"}]                                            by sku,
--    "history":    [{"id", "from_status", "to_status", "source", "idempotency_key", "actor",
--                    "note", "at"}]                                            oldest first,
--    "payments":   [{"txn_no", "amount_cents", "channel", "outcome", "at", "currency",
--                    "operator", "reason"}]                                    oldest first,
--    "exceptions": [{"id", "kind", "txn_no", "amount_cents", "resolution", "state", "note",
--                    "created_at", "resolved_at", "resolved_by", "currency"}]  oldest first,
--    "amendments": [{"id", "operator", "at", "before", "after"}]               oldest first,
--    "deadline_changes": [{"id", "operator", "at", "before", "after"}]         oldest first,
--    "reminders":  [{"offset_seconds", "state", "due_at", "sent_at", "skip_reason"}]
--                                                                              earliest first,
--    "charge_until",
--    "charges":    [{"charge_ref", "state", "began_at", "until", "ended_at", "txn_no",
--                    "ended_late"}]                                            oldest first}
-- charges: the order's charges (begin_charge) hot and archived (an order archived with them can
-- still have a late payment's exception in the hot tables); until = the charge's bound,
-- charge_until = the order's (the latest bound of its pending charges, NULL when none).
-- status may be released (release_order: history has its operator and reason).
-- found = false with the order fields NULL when no order row exists (payments and exceptions of
-- an unknown order are still reported). NULL when nothing at all is recorded under the number.
CREATE OR REPLACE FUNCTION ordergate.order_report(p_order_no text) RETURNS jsonb
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
                   'outcome', p.outcome, 'at', _ctl_iso(p.created_at), 'currency', p.currency,
                   'operator', p.operator, 'reason', p.reason)
                   ORDER BY p.created_at, p.txn_no), '[]'::jsonb) AS j
          FROM ordergate.payments p
         WHERE p.order_no = p_order_no
    ), exceptions AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', e.id, 'kind', e.kind, 'txn_no', e.txn_no, 'amount_cents', e.amount_cents,
                   'resolution', e.resolution, 'state', e.state, 'note', e.note,
                   'created_at', _ctl_iso(e.created_at), 'resolved_at', _ctl_iso(e.resolved_at),
                   'resolved_by', e.resolved_by, 'currency', e.currency)
                   ORDER BY e.created_at, e.id), '[]'::jsonb) AS j
          FROM ordergate.exceptions e
         WHERE e.order_no = p_order_no
    ), amendments AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', m.id, 'operator', m.operator, 'at', _ctl_iso(m.amended_at),
                   'before', m.before, 'after', m.after)
                   ORDER BY m.id), '[]'::jsonb) AS j
          FROM ordergate.amendments m
         WHERE m.order_no = p_order_no
    ), deadlines AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', d.id, 'operator', d.operator, 'at', _ctl_iso(d.changed_at),
                   'before', _ctl_iso(d.before), 'after', _ctl_iso(d.after))
                   ORDER BY d.id), '[]'::jsonb) AS j
          FROM ordergate.deadline_changes d
         WHERE d.order_no = p_order_no
    ), reminders AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'offset_seconds', r.offset_seconds, 'state', r.state,
                   'due_at', _ctl_iso(r.due_at), 'sent_at', _ctl_iso(r.sent_at),
                   'skip_reason', r.skip_reason)
                   ORDER BY r.offset_seconds DESC), '[]'::jsonb) AS j
          FROM ordergate.reminders r
         WHERE r.order_no = p_order_no
    ), charges AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'charge_ref', c.charge_ref, 'state', c.state,
                   'began_at', _ctl_iso(c.begun_at), 'until', _ctl_iso(c.bound_at),
                   'ended_at', _ctl_iso(c.ended_at), 'txn_no', c.txn_no,
                   'ended_late', c.ended_late)
                   ORDER BY c.begun_at, c.charge_ref), '[]'::jsonb) AS j
          FROM (SELECT h.charge_ref, h.state, h.begun_at, h.bound_at, h.ended_at, h.txn_no, h.ended_late
                  FROM ordergate.charges h
                 WHERE h.order_no = p_order_no
                 UNION ALL
                SELECT a.charge_ref, a.state, a.begun_at, a.bound_at, a.ended_at, a.txn_no, a.ended_late
                  FROM ordergate.archived_charges a
                 WHERE a.order_no = p_order_no) c
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
                   'currency', (SELECT o.currency FROM o),
                   'allow_partial', (SELECT o.allow_partial FROM o),
                   'captured_cents', (SELECT o.captured_cents FROM o),
                   'items', items.j,
                   'history', history.j,
                   'payments', payments.j,
                   'exceptions', exceptions.j,
                   'amendments', amendments.j,
                   'deadline_changes', deadlines.j,
                   'reminders', reminders.j,
                   'charge_until', (SELECT _ctl_iso(o.charge_until) FROM o),
                   'charges', charges.j)
           END
      FROM items, history, payments, exceptions, amendments, deadlines, reminders, charges
$$;

GRANT EXECUTE ON FUNCTION ordergate.order_report(text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.order_report(text) IS
    'Everything recorded under one order number, as one JSON document read in one snapshot';
