-- examples/saleor/hooks.sql: Saleor's side of every order transition the gate decides, run by
-- ordergate inside the claim that won it, and their registration with ordergate.add_hook.
--
--   psql -v ON_ERROR_STOP=1 -f examples/saleor/hooks.sql      (after schema.sql)
--
-- Run as a superuser (or a member of saleor and ordergate_admin). One transaction.
--
-- A hook is fn(order_nos text[], source text) RETURNS void, called once per claim statement with
-- the orders that statement won, in order_no order, after ordergate's own effects and before the
-- commit (schema/README.md, "Hooks"). Each is SECURITY DEFINER, owned by saleor (the one role of
-- this shop), pins its search_path, and EXECUTE is granted to ordergate_owner only (the owner
-- keeps it: docs/integrate.md, "A shop with one role").
--
-- Lock order (docs/integrate.md, "Lock order"): ordergate's rows (the claim took them), then
-- order_order by id, discount_vouchercode by id, warehouse_stock by id, and last the allocations
-- of the locked orders (nobody touches those without holding their order's row). The shop's
-- order rows are locked FOR NO KEY UPDATE, the mode an UPDATE of non-key columns takes: it does
-- not conflict with the FOR KEY SHARE lock a foreign key check takes on the parent, so a payment
-- callback that inserted a transaction item (a child of the order) before calling the gate
-- cannot deadlock against a cancel's hook. The order service calls the gate before it locks any
-- row a hook writes.
--
-- A hook never raises for a condition that would never change (an order the shop does not know,
-- or in another status): it records it in ordergate_hook_anomaly and leaves the order alone.
\set ON_ERROR_STOP on
BEGIN;
SET LOCAL ROLE saleor;
SET LOCAL search_path = saleor, pg_temp;

-- numeric(20,3) amount <-> the gate's minor units, by the currency's exponent. minor_units
-- refuses an amount with more decimals than the currency has (it has no minor-unit form).
CREATE FUNCTION saleor.minor_units(p_amount numeric, p_exponent int) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = saleor, pg_temp AS $$
BEGIN
    IF p_amount * 10::numeric ^ p_exponent <> trunc(p_amount * 10::numeric ^ p_exponent) THEN
        RAISE EXCEPTION 'amount % has more than % decimals', p_amount, p_exponent
              USING ERRCODE = '22023';
    END IF;
    RETURN (p_amount * 10::numeric ^ p_exponent)::bigint;
END
$$;
CREATE FUNCTION saleor.major_units(p_minor bigint, p_exponent int) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT SET search_path = saleor, pg_temp AS $$
    SELECT round(p_minor::numeric / 10::numeric ^ p_exponent, 3)
$$;

-- Locks the shop's orders named by p_nos (FOR NO KEY UPDATE, by id: ordergate's byte order of
-- the same text) and returns the ids of those in one of p_statuses, in that order. Every other
-- one (unknown, not a uuid, in another status) is recorded as an anomaly of p_event.
CREATE FUNCTION saleor.orders_lock(p_nos text[], p_statuses text[], p_event text, p_source text)
RETURNS uuid[]
LANGUAGE plpgsql SET search_path = saleor, pg_temp AS $$
DECLARE
    v_ids uuid[];
BEGIN
    WITH want AS (
        SELECT DISTINCT x FROM unnest(p_nos) AS u(x)
    ), l AS MATERIALIZED (
        SELECT o.id, o.status
          FROM order_order o
         WHERE o.id = ANY (ARRAY(SELECT x::uuid FROM want
                                  WHERE x ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'))
         ORDER BY o.id
           FOR NO KEY UPDATE
    ), bad AS (
        INSERT INTO ordergate_hook_anomaly (event, source, order_no, problem)
        SELECT p_event, p_source, w.x,
               CASE WHEN l.id IS NULL THEN 'not in order_order'
                    ELSE format('order_order status %s, expected %s', l.status,
                                array_to_string(p_statuses, ' or ')) END
          FROM want w
          LEFT JOIN l ON l.id::text = w.x
         WHERE l.id IS NULL OR NOT l.status = ANY (p_statuses)
    )
    SELECT array_agg(l.id ORDER BY l.id) FILTER (WHERE l.status = ANY (p_statuses)) INTO v_ids FROM l;
    RETURN coalesce(v_ids, '{}');
END
$$;

-- cancelled (a timeout by the consumer or the scanner, or staff's close_order): the order is
-- 'expired' (a timeout: what Saleor's own expiry would have written) or 'canceled' (staff), its
-- voucher code's use is given back, its stock allocations are released (quantity_allocated down
-- by the sum per stock row) and deleted, and a charge still pending on it is void.
CREATE FUNCTION saleor.hook_cancelled(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
DECLARE
    p_source text := hook_cancelled.source;
    v_ids    uuid[];
BEGIN
    v_ids := orders_lock(hook_cancelled.order_nos, ARRAY['unconfirmed'], 'cancelled', p_source);
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    UPDATE order_order o
       SET status = CASE WHEN p_source = 'manual' THEN 'canceled' ELSE 'expired' END,
           expired_at = CASE WHEN p_source = 'manual' THEN NULL ELSE now() END,
           updated_at = now()
     WHERE o.id = ANY (v_ids);

    -- Voucher codes: one row per code with the number of its orders in this batch (an UPDATE
    -- ... FROM the orders would lower a code shared by two orders once).
    PERFORM 1 FROM discount_vouchercode c
     WHERE c.code IN (SELECT o.voucher_code FROM order_order o WHERE o.id = ANY (v_ids))
     ORDER BY c.id
       FOR NO KEY UPDATE;
    UPDATE discount_vouchercode c SET used = c.used - u.n
      FROM (SELECT o.voucher_code AS code, count(*)::int AS n
              FROM order_order o
             WHERE o.id = ANY (v_ids) AND o.voucher_code IS NOT NULL
             GROUP BY 1) u
     WHERE c.code = u.code;

    -- Stock: locked by id, lowered by the sum of this batch's allocations per stock row (orders
    -- of one batch share hot stock rows), then the allocations go.
    PERFORM 1 FROM warehouse_stock s
     WHERE s.id IN (SELECT a.stock_id
                      FROM warehouse_allocation a JOIN order_orderline l ON l.id = a.order_line_id
                     WHERE l.order_id = ANY (v_ids))
     ORDER BY s.id
       FOR NO KEY UPDATE;
    UPDATE warehouse_stock s SET quantity_allocated = s.quantity_allocated - r.q
      FROM (SELECT a.stock_id, sum(a.quantity_allocated)::int AS q
              FROM warehouse_allocation a JOIN order_orderline l ON l.id = a.order_line_id
             WHERE l.order_id = ANY (v_ids)
             GROUP BY 1) r
     WHERE s.id = r.stock_id;
    DELETE FROM warehouse_allocation a
     USING order_orderline l
     WHERE l.id = a.order_line_id AND l.order_id = ANY (v_ids);

    UPDATE payment_transactionitem t SET charge_pending_value = 0, modified_at = now()
     WHERE t.order_id = ANY (v_ids) AND t.charge_pending_value <> 0;
END
$$;

-- paid (a payment claim won; the order may have been confirmed by staff first, then it is
-- already 'unfulfilled'): the shop's payment rows. Every payment ordergate captured for the
-- order (the parts of an order paid in parts, the one that paid it) becomes a transaction item
-- keyed by (order, psp_reference = txn_no): a row the order service or a webhook wrote before
-- for the same txn is kept (the same key), a charge begun under that reference is captured.
-- Then the order's charged total and charge status follow, and a pending order is confirmed.
CREATE FUNCTION saleor.hook_paid(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
DECLARE
    v_ids uuid[];
BEGIN
    v_ids := orders_lock(hook_paid.order_nos, ARRAY['unconfirmed', 'unfulfilled'], 'paid', hook_paid.source);
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO payment_transactionitem AS t
           (token, created_at, modified_at, name, psp_reference, currency, charged_value,
            authorized_value, charge_pending_value, refunded_value, order_id)
    SELECT gen_random_uuid(), now(), now(), p.channel, p.txn_no, p.currency,
           major_units(p.amount_cents, c.exponent), 0, 0, 0, p.order_no::uuid
      FROM ordergate.payments p
      JOIN ordergate.currencies c ON c.code = p.currency
     WHERE p.order_no = ANY (ARRAY(SELECT x::text FROM unnest(v_ids) AS u(x)))
       AND p.outcome IN ('partial', 'paid', 'overpaid')
     ORDER BY p.order_no, p.txn_no
    ON CONFLICT (order_id, psp_reference) DO UPDATE
       SET charged_value = excluded.charged_value, charge_pending_value = 0, modified_at = now()
     WHERE t.charged_value <> excluded.charged_value OR t.charge_pending_value <> 0;
    UPDATE order_order o
       SET status = 'unfulfilled',
           total_charged_amount = s.charged,
           charge_status = CASE WHEN s.charged > o.total_gross_amount THEN 'overcharged'
                                WHEN s.charged = o.total_gross_amount THEN 'full'
                                WHEN s.charged > 0 THEN 'partial' ELSE 'none' END,
           updated_at = now()
      FROM (SELECT t.order_id, sum(t.charged_value) AS charged
              FROM payment_transactionitem t
             WHERE t.order_id = ANY (v_ids)
             GROUP BY 1) s
     WHERE o.id = ANY (v_ids) AND s.order_id = o.id;
END
$$;

-- released (staff confirmed the unpaid order: cash on delivery, invoice, Saleor's orderConfirm
-- with unpaid orders allowed): the order is confirmed ('unfulfilled') and keeps its allocations
-- and voucher; a payment that comes later runs the paid hook, which records it.
CREATE FUNCTION saleor.hook_released(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
DECLARE
    v_ids uuid[];
BEGIN
    v_ids := orders_lock(hook_released.order_nos, ARRAY['unconfirmed'], 'released', hook_released.source);
    UPDATE order_order o SET status = 'unfulfilled', updated_at = now() WHERE o.id = ANY (v_ids);
END
$$;

-- late_payment and payment_exception, a three-argument hook (context: per order, the payment's
-- txn_no, amount_cents, currency, channel, outcome and, when one was recorded, the exception's
-- kind and resolution): money that reached the shop but not the order (paid after the cancel,
-- a second payment, a wrong amount or currency) goes into the order's history, for staff, with
-- what ordergate decided (refunded automatically or reviewed). A payment for an order the gate
-- does not know (not_found) has no shop order either, and is left to the gate's review queue.
CREATE FUNCTION saleor.hook_payment_note(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
DECLARE
    p_nos text[];
BEGIN
    SELECT array_agg(x ORDER BY x) INTO p_nos
      FROM unnest(hook_payment_note.order_nos) AS u(x)
     WHERE hook_payment_note.context -> x ->> 'outcome' IS DISTINCT FROM 'not_found';
    IF p_nos IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO ordergate_hook_anomaly (event, source, order_no, problem)
    SELECT 'payment_note', hook_payment_note.source, x, 'not in order_order'
      FROM unnest(p_nos) AS u(x)
     WHERE NOT EXISTS (SELECT 1 FROM order_order o WHERE o.id::text = x);
    INSERT INTO order_orderevent (date, type, parameters, order_id)
    SELECT now(), 'transaction_event',
           jsonb_build_object(
               'message', format('payment %s: %s, %s %s via %s; %s', c ->> 'txn_no', c ->> 'outcome',
                                 major_units((c ->> 'amount_cents')::bigint, k.exponent),
                                 c ->> 'currency', c ->> 'channel',
                                 coalesce(c ->> 'resolution', 'no exception')),
               'reference', c ->> 'txn_no', 'outcome', c ->> 'outcome',
               'amount', major_units((c ->> 'amount_cents')::bigint, k.exponent),
               'currency', c ->> 'currency', 'resolution', c ->> 'resolution'),
           o.id
      FROM order_order o
      CROSS JOIN LATERAL (SELECT hook_payment_note.context -> o.id::text AS c) v
      JOIN ordergate.currencies k ON k.code = v.c ->> 'currency'
     WHERE o.id = ANY (ARRAY(SELECT x::uuid FROM unnest(p_nos) AS u(x)
                              WHERE x ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'))
     ORDER BY o.id;
END
$$;

REVOKE EXECUTE ON FUNCTION saleor.minor_units(numeric, int), saleor.major_units(bigint, int),
    saleor.orders_lock(text[], text[], text, text), saleor.hook_cancelled(text[], text),
    saleor.hook_paid(text[], text), saleor.hook_released(text[], text),
    saleor.hook_payment_note(text[], text, jsonb) FROM PUBLIC;
GRANT USAGE ON SCHEMA saleor TO ordergate_owner;
GRANT EXECUTE ON FUNCTION saleor.hook_cancelled(text[], text), saleor.hook_paid(text[], text),
    saleor.hook_released(text[], text), saleor.hook_payment_note(text[], text, jsonb) TO ordergate_owner;

RESET ROLE;
SELECT ordergate.add_hook('cancelled', 'saleor.hook_cancelled(text[],text)');
SELECT ordergate.add_hook('paid', 'saleor.hook_paid(text[],text)');
SELECT ordergate.add_hook('released', 'saleor.hook_released(text[],text)');
SELECT ordergate.add_hook('late_payment', 'saleor.hook_payment_note(text[],text,jsonb)');
SELECT ordergate.add_hook('payment_exception', 'saleor.hook_payment_note(text[],text,jsonb)');
COMMIT;
