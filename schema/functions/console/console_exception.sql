-- console_exception: one exception with its payment, its order (order_report) and its refunds,
-- as one JSON document; NULL when no exception has this id. refundable: a refund may be approved
-- (an open late or double payment under manual review that no refund was requested for).
CREATE OR REPLACE FUNCTION ordergate.console_exception(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT jsonb_build_object(
        'id', e.id, 'order_no', e.order_no, 'kind', e.kind, 'txn_no', e.txn_no,
        'amount_cents', e.amount_cents, 'currency', e.currency, 'resolution', e.resolution,
        'state', e.state, 'note', e.note, 'created_at', _ctl_iso(e.created_at),
        'resolved_at', _ctl_iso(e.resolved_at), 'resolved_by', e.resolved_by,
        'refundable', e.state = 'open' AND e.kind IN ('late_payment', 'double_payment')
                      AND e.resolution = 'manual_review'
                      AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.exception_id = e.id),
        'payment', (SELECT jsonb_build_object('txn_no', p.txn_no, 'amount_cents', p.amount_cents,
                                              'currency', p.currency, 'channel', p.channel,
                                              'outcome', p.outcome, 'at', _ctl_iso(p.created_at),
                                              'operator', p.operator, 'reason', p.reason)
                      FROM payments p WHERE p.txn_no = e.txn_no),
        'refunds', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                               'refund_ref', r.refund_ref, 'outcome', r.outcome, 'actor', r.actor,
                               'at', _ctl_iso(r.recorded_at)) ORDER BY r.recorded_at), '[]'::jsonb)
                      FROM refunds r WHERE r.exception_id = e.id),
        'order', order_report(e.order_no))
      FROM exceptions e WHERE e.id = p_id;
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_exception(bigint) TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_exception(bigint) IS
    'One exception with its payment, order and refunds, for the console';
