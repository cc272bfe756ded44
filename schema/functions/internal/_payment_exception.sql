-- _payment_exception: the exception a payment leaves (claim_payment: an overpaid part's excess,
-- a late, double, mismatched or unknown order's payment) and, in the same transaction, its event:
-- refund_requested when the money goes back by itself, else reconciliation_alert.
-- Contract: p_resolution NULL decides by the currency's limit (auto_refund when p_amount <=
-- _refund_limit(p_currency), else manual_review); 'manual_review' forces a review. The event
-- carries the payment, the exception (id, kind, resolution), p_order_status and, so a refund
-- reader knows what the money was for, the order's coupon, lines (_order_items_json) and shop
-- data. Writes one exceptions row and one outbox row, nothing else; the caller holds the order
-- (or found it archived, or not at all) and records the payment's outcome itself. Returns the
-- exception's id and the resolution it took. Only the exception paths call it: a plain payment
-- pays nothing for it.
CREATE OR REPLACE FUNCTION ordergate._payment_exception(p_order_no text, p_kind text, p_txn text,
                                                        p_amount bigint, p_currency text,
                                                        p_resolution text, p_note text,
                                                        p_channel text, p_order_status text,
                                                        p_source text, p_actor text,
                                                        p_coupon text, p_shop jsonb,
                                                        OUT o_id bigint, OUT o_resolution text)
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_event text;
BEGIN
    o_resolution := coalesce(p_resolution,
                             CASE WHEN p_amount <= _refund_limit(p_currency) THEN 'auto_refund'
                                  ELSE 'manual_review' END);
    v_event := CASE o_resolution WHEN 'auto_refund' THEN 'refund_requested' ELSE 'reconciliation_alert' END;
    INSERT INTO exceptions (order_no, kind, txn_no, amount_cents, resolution, currency, note)
    VALUES (p_order_no, p_kind, p_txn, p_amount, o_resolution, p_currency, p_note)
    RETURNING id INTO o_id;
    INSERT INTO outbox (event_type, order_no, payload)
    VALUES (v_event, p_order_no,
            jsonb_build_object('v', 1, 'event', v_event,
                               'order_no', p_order_no, 'txn_no', p_txn, 'amount_cents', p_amount,
                               'channel', p_channel, 'kind', p_kind, 'resolution', o_resolution,
                               'exception_id', o_id, 'order_status', p_order_status,
                               'source', p_source, 'actor', p_actor,
                               'coupon_id', p_coupon, 'items', _order_items_json(p_order_no),
                               'shop', p_shop, 'currency', p_currency));
END
$$;
COMMENT ON FUNCTION ordergate._payment_exception(text,text,text,bigint,text,text,text,text,text,text,text,text,jsonb) IS
    'Internal: a payment''s exception and its refund_requested or reconciliation_alert event';
