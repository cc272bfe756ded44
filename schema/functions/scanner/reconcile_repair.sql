-- reconcile_repair: a successful payment that hit a cancelled order (payment outcome late_payment,
-- or a 'paid' payment whose order is cancelled) without an exception gets its late_payment
-- exception now, in the payment's currency, as manual_review (something already went wrong: a
-- person looks), plus a reconciliation_alert event. Returns how many were created. Safe to run
-- concurrently with the gate (unique exception per txn_no). The money invariants 10-13 are not
-- repaired: a wrong sum or a missing refund of a part is for a person to look at.
CREATE OR REPLACE FUNCTION ordergate.reconcile_repair() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_n bigint;
BEGIN
    WITH missing AS (
        SELECT p.txn_no, p.order_no, p.amount_cents, p.channel, p.currency
          FROM payments p
          JOIN orders o ON o.order_no = p.order_no
         WHERE o.status = 'cancelled'
           AND p.outcome IN ('late_payment', 'paid')
           AND NOT EXISTS (SELECT 1 FROM exceptions x WHERE x.txn_no = p.txn_no)
    ), ins AS (
        INSERT INTO exceptions (order_no, kind, txn_no, amount_cents, resolution, currency, note)
        SELECT m.order_no, 'late_payment', m.txn_no, m.amount_cents, 'manual_review', m.currency,
               format('created by reconcile_repair: payment %s via %s hit a cancelled order without an exception',
                      m.txn_no, m.channel)
          FROM missing m
        ON CONFLICT (txn_no) WHERE txn_no IS NOT NULL DO NOTHING
        RETURNING id, order_no, txn_no, amount_cents, currency
    ), ev AS (
        INSERT INTO outbox (event_type, order_no, payload)
        SELECT 'reconciliation_alert', ins.order_no,
               jsonb_build_object('v', 1, 'event', 'reconciliation_alert', 'order_no', ins.order_no,
                                  'txn_no', ins.txn_no, 'amount_cents', ins.amount_cents,
                                  'kind', 'late_payment', 'resolution', 'manual_review',
                                  'exception_id', ins.id, 'order_status', 'cancelled',
                                  'repaired', true, 'currency', ins.currency)
          FROM ins
        RETURNING 1
    )
    SELECT count(*) INTO v_n FROM ev;
    RETURN v_n;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.reconcile_repair() TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.reconcile_repair() IS
    'Creates the missing late_payment exception of a payment that hit a cancelled order';
