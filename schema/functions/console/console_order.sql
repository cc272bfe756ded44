-- console_order: an order's whole record for the console's timeline: order_report (the order,
-- its items, status log, payments, exceptions; a hold shows as expire_at past
-- original_expire_at) plus its shop data, its pending charges, its refunds, the events
-- published for it (outbox) and, while it is pending, what closing it would do (close_effects:
-- the built-in stock lines returned and the coupon released). NULL when nothing is recorded.
CREATE OR REPLACE FUNCTION ordergate.console_order(p_order_no text) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT r || jsonb_build_object(
        'shop', (SELECT o.shop FROM orders o WHERE o.order_no = p_order_no),
        'refunds', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                               'refund_ref', f.refund_ref, 'txn_no', f.txn_no,
                               'exception_id', f.exception_id, 'outcome', f.outcome,
                               'actor', f.actor, 'at', _ctl_iso(f.recorded_at))
                               ORDER BY f.recorded_at), '[]'::jsonb)
                      FROM refunds f JOIN exceptions e ON e.id = f.exception_id
                     WHERE e.order_no = p_order_no),
        'charges', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                               'charge_ref', c.charge_ref, 'state', c.state,
                               'begun_at', _ctl_iso(c.begun_at), 'ended_at', _ctl_iso(c.ended_at),
                               'txn_no', c.txn_no) ORDER BY c.begun_at), '[]'::jsonb)
                      FROM charges c WHERE c.order_no = p_order_no),
        'events', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                              'id', b.id, 'event_type', b.event_type,
                              'at', _ctl_iso(b.created_at),
                              'published_at', _ctl_iso(b.published_at),
                              'quarantined_at', _ctl_iso(b.quarantined_at)) ORDER BY b.id),
                            '[]'::jsonb)
                     FROM outbox b WHERE b.order_no = p_order_no),
        'close_effects', (SELECT jsonb_build_object(
                                 'stock_back', r -> 'items', 'coupon_back', o.coupon_id)
                            FROM orders o
                           WHERE o.order_no = p_order_no AND o.status = 'pending_payment'))
      FROM order_report(p_order_no) r
     WHERE r IS NOT NULL;
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_order(text) TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_order(text) IS
    'An order''s timeline for the console: report, shop data, refunds, events, close effects';
