-- examples/saleor/checks.sql: the shop's own books as checks, registered with ordergate.add_check
-- so that ordergate.reconcile() and `ordergate-scanner --reconcile` run them every day after the
-- built-in invariants (each as invariant shop:<name>), report and alert on them like the rest.
--
--   psql -v ON_ERROR_STOP=1 -f examples/saleor/checks.sql      (after hooks.sql)
--
-- A check is fn() RETURNS TABLE (detail text), one row per violation, vetted like a hook:
-- SECURITY DEFINER, owned by the shop's role (saleor), its own search_path, EXECUTE for
-- ordergate_owner only (reconcile runs as it). They read; they never write. Run as a superuser
-- (or a member of saleor and ordergate_admin). One transaction.
\set ON_ERROR_STOP on
BEGIN;
SET LOCAL ROLE saleor;
SET LOCAL search_path = saleor, pg_temp;

-- Every stock row's quantity_allocated is the sum of its allocations, and never more than its
-- quantity. (A release applied once for two allocations of one batch breaks the first.)
CREATE FUNCTION saleor.check_stock_allocations() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
    SELECT format('stock %s: quantity_allocated %s, allocations %s, quantity %s',
                  s.id, s.quantity_allocated, coalesce(a.q, 0), s.quantity)
      FROM warehouse_stock s
      LEFT JOIN (SELECT stock_id, sum(quantity_allocated) AS q
                   FROM warehouse_allocation GROUP BY 1) a ON a.stock_id = s.id
     WHERE s.quantity_allocated <> coalesce(a.q, 0)
        OR s.quantity_allocated > s.quantity
     ORDER BY s.id
$$;

-- No allocation holds stock for an order that expired or was cancelled.
CREATE FUNCTION saleor.check_closed_allocations() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
    SELECT format('order %s (#%s, %s): allocation %s of %s on stock %s',
                  o.id, o.number, o.status, a.id, a.quantity_allocated, a.stock_id)
      FROM warehouse_allocation a
      JOIN order_orderline l ON l.id = a.order_line_id
      JOIN order_order o ON o.id = l.order_id
     WHERE o.status IN ('expired', 'canceled')
     ORDER BY o.id, a.id
$$;

-- Each voucher code's use counts the live orders that used it (not expired or cancelled), and
-- stays within its voucher's usage limit.
CREATE FUNCTION saleor.check_vouchers() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
    SELECT format('code %s: used %s, live orders %s, usage limit %s',
                  c.code, c.used, coalesce(n.k, 0), v.usage_limit)
      FROM discount_vouchercode c
      JOIN discount_voucher v ON v.id = c.voucher_id
      LEFT JOIN (SELECT voucher_code, count(*) AS k FROM order_order
                  WHERE status NOT IN ('expired', 'canceled') GROUP BY 1) n ON n.voucher_code = c.code
     WHERE c.used <> coalesce(n.k, 0) OR c.used > coalesce(v.usage_limit, c.used)
     ORDER BY c.code
$$;

-- Money, in the gate's minor units by the currency's exponent: each shop order of a gate order
-- (hot or archived) has its amount, currency and a status that fits the gate's; its charged
-- total is the sum of its transaction items and fits its charge status; and, per currency, the
-- captured values of the transaction items are exactly what ordergate recorded as captured
-- (partial, paid, overpaid payments). Gate orders the shop no longer has are not violations: a
-- shop may delete its old orders (docs/integrate.md).
CREATE FUNCTION saleor.check_money() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
    WITH gate AS (
        SELECT order_no, amount_cents, currency, status FROM ordergate.orders
        UNION ALL
        SELECT order_no, amount_cents, currency, status FROM ordergate.archived_orders
    ), charged AS (
        SELECT order_id, sum(charged_value) AS v FROM payment_transactionitem GROUP BY 1
    )
    SELECT format('order %s (#%s): %s %s %s charged %s (%s), gate %s %s %s',
                  o.id, o.number, o.status, o.total_gross_amount, o.currency,
                  o.total_charged_amount, o.charge_status, g.status, g.amount_cents, g.currency)
      FROM order_order o
      LEFT JOIN gate g ON g.order_no = o.id::text
      LEFT JOIN ordergate.currencies c ON c.code = o.currency
      LEFT JOIN charged t ON t.order_id = o.id
     WHERE g.order_no IS NULL
        OR c.code IS NULL
        OR g.currency <> o.currency
        OR g.amount_cents <> minor_units(o.total_gross_amount, c.exponent)
        OR o.total_charged_amount <> coalesce(t.v, 0)
        OR o.charge_status <> CASE WHEN o.total_charged_amount = 0 THEN 'none'
                                   WHEN o.total_charged_amount < o.total_gross_amount THEN 'partial'
                                   WHEN o.total_charged_amount = o.total_gross_amount THEN 'full'
                                   ELSE 'overcharged' END
        OR o.status <> CASE g.status WHEN 'pending_payment' THEN 'unconfirmed'
                                     WHEN 'paid' THEN 'unfulfilled'
                                     WHEN 'released' THEN 'unfulfilled'
                                     ELSE o.status END
        OR (g.status = 'cancelled' AND o.status NOT IN ('expired', 'canceled'))
        OR (g.status = 'paid' AND o.charge_status NOT IN ('full', 'overcharged'))
    UNION ALL
    SELECT format('currency %s: transaction items captured %s, ordergate captured %s',
                  coalesce(s.currency, p.currency), coalesce(s.minor, 0), coalesce(p.minor, 0))
      FROM (SELECT t.currency, sum(minor_units(t.charged_value, c.exponent)) AS minor
              FROM payment_transactionitem t JOIN ordergate.currencies c ON c.code = t.currency
             GROUP BY 1) s
      FULL JOIN (SELECT currency, sum(amount_cents) AS minor
                   FROM (SELECT currency, amount_cents, outcome FROM ordergate.payments
                         UNION ALL
                         SELECT currency, amount_cents, outcome FROM ordergate.archived_payments) x
                  WHERE outcome IN ('partial', 'paid', 'overpaid')
                  GROUP BY 1) p ON p.currency = s.currency
     WHERE s.minor IS DISTINCT FROM p.minor
$$;

REVOKE EXECUTE ON FUNCTION saleor.check_stock_allocations(), saleor.check_closed_allocations(),
    saleor.check_vouchers(), saleor.check_money() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION saleor.check_stock_allocations(), saleor.check_closed_allocations(),
    saleor.check_vouchers(), saleor.check_money() TO ordergate_owner;

RESET ROLE;
SELECT ordergate.add_check('stock_allocations', 'saleor.check_stock_allocations()');
SELECT ordergate.add_check('closed_allocations', 'saleor.check_closed_allocations()');
SELECT ordergate.add_check('vouchers', 'saleor.check_vouchers()');
SELECT ordergate.add_check('money', 'saleor.check_money()');
COMMIT;
