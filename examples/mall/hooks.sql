-- examples/mall/hooks.sql: the shop's side of every order transition, run by ordergate inside the
-- claim that won it, and their registration with ordergate.add_hook.
--
--   psql -v ON_ERROR_STOP=1 -f examples/mall/hooks.sql      (after schema.sql)
--
-- Run as a superuser, or as a member of mall_owner and ordergate_admin. One transaction.
--
-- The contract (schema/README.md): a hook is fn(order_nos text[], source text) RETURNS void,
-- called once per claim statement with exactly the orders that statement won for its event, in
-- order_no order, after ordergate's own effects and before the commit, in the same transaction.
-- A hook that raises rolls the whole claim back and the consumer and the scanner retry it, so a
-- hook raises only for what may pass (a lock or statement timeout, a serialization failure: the
-- database raises those itself). A condition that would never change (an order the shop does not
-- know, or not in the state the transition needs, a couponed order whose coupon is not marked
-- used) is recorded in ordergate_hook_anomaly and left alone, the rest of the batch goes on
-- (docs/integrate.md, "Write your hooks"). examples/mall/check.sql requires that table empty.
--
-- Privileges: the gate functions run as ordergate_owner, so that is who calls a hook. Each hook is
-- SECURITY DEFINER owned by mall_owner (it writes the shop's tables as their owner), pins its
-- search_path, and only ordergate_owner may execute it: the order service (mall_app) cannot call
-- a hook to close or pay an order behind the gate's back.
--
-- Lock order (deadlock freedom): the claim has locked ordergate's order rows (order_no order);
-- a hook then locks the shop's rows: oms_order by order_sn ascending, then sms_coupon_history by
-- id ascending, then pms_sku_stock by id ascending. The order service calls the gate before it
-- locks any row a hook writes (placing: place_order, then the coupon row, then the stock rows in
-- SKU order; paying: claim_payment, whose hook does the shop's side), so it never holds a shop row
-- while it waits for an ordergate order row that a claim holds.
\set ON_ERROR_STOP on
BEGIN;
SET LOCAL ROLE mall_owner;
SET LOCAL search_path = mall, pg_temp;

-- Locks the shop's orders p_sns (FOR UPDATE, by order_sn ascending) and returns the ids of those
-- in p_status, in that order. Each one missing or in another status is recorded as an anomaly of
-- p_event and left out. Not SECURITY DEFINER: only the hooks (running as mall_owner) call it.
CREATE OR REPLACE FUNCTION mall.orders_lock(p_sns text[], p_status int, p_event text, p_source text)
RETURNS bigint[]
LANGUAGE plpgsql SET search_path = mall, pg_temp AS $$
DECLARE
    v_ids bigint[];
BEGIN
    -- One statement: the lock pass (a CTE runs once, so the rows are locked once, in order), the
    -- anomalies written by a data-modifying CTE, the fitting ids returned.
    WITH l AS MATERIALIZED (
        SELECT o.id, o.order_sn, o.status
          FROM oms_order o
         WHERE o.order_sn = ANY (p_sns)
         ORDER BY o.order_sn
           FOR UPDATE
    ), bad AS (
        INSERT INTO ordergate_hook_anomaly (event, source, order_sn, problem)
        SELECT p_event, p_source, u.x,
               CASE WHEN l.id IS NULL THEN 'not in oms_order'
                    ELSE format('oms_order status %s, expected %s', l.status, p_status) END
          FROM (SELECT DISTINCT x FROM unnest(p_sns) AS u(x)) u
          LEFT JOIN l ON l.order_sn = u.x
         WHERE l.id IS NULL OR l.status <> p_status
    )
    SELECT array_agg(l.id ORDER BY l.order_sn) FILTER (WHERE l.status = p_status) INTO v_ids FROM l;
    RETURN coalesce(v_ids, '{}');
END
$$;

-- Units per SKU of the orders p_ids, summed (a customer may order one SKU in several lines of
-- several orders; an UPDATE ... FROM with repeated keys would apply only one of them), in SKU
-- order, with the stock rows locked in that order.
CREATE OR REPLACE FUNCTION mall.stock_lock(p_ids bigint[], OUT skus bigint[], OUT qtys int[])
LANGUAGE plpgsql SET search_path = mall, pg_temp AS $$
BEGIN
    SELECT array_agg(s.sku ORDER BY s.sku), array_agg(s.q ORDER BY s.sku)
      INTO skus, qtys
      FROM (SELECT i.product_sku_id AS sku, sum(i.product_quantity)::int AS q
              FROM oms_order_item i
             WHERE i.order_id = ANY (p_ids)
             GROUP BY 1) s;
    IF skus IS NOT NULL THEN
        PERFORM 1 FROM pms_sku_stock k WHERE k.id = ANY (skus) ORDER BY k.id FOR UPDATE;
    END IF;
END
$$;

-- cancelled (timeouts by the consumer or the scanner, a manual close): close the orders (status
-- 4), give their coupons back (use_status 0), release their locked stock.
CREATE OR REPLACE FUNCTION mall.hook_cancelled(order_nos text[], source text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mall, pg_temp AS $$
DECLARE
    p_source  text   := hook_cancelled.source;
    v_ids     bigint[];
    v_sns     text[];
    v_skus    bigint[];
    v_qtys    int[];
BEGIN
    v_ids := orders_lock(hook_cancelled.order_nos, 0, 'cancelled', p_source);
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    UPDATE oms_order o SET status = 4, modify_time = now() WHERE o.id = ANY (v_ids);
    SELECT array_agg(o.order_sn ORDER BY o.order_sn) INTO v_sns FROM oms_order o WHERE o.id = ANY (v_ids);

    -- The coupons back: the used history row of each couponed order, locked by id.
    PERFORM 1 FROM sms_coupon_history h
     WHERE h.order_sn = ANY (v_sns) AND h.use_status = 1
     ORDER BY h.id
       FOR UPDATE;
    UPDATE sms_coupon_history h SET use_status = 0
     WHERE h.order_sn = ANY (v_sns) AND h.use_status = 1;
    INSERT INTO ordergate_hook_anomaly (event, source, order_sn, problem)
    SELECT 'cancelled', p_source, o.order_sn, 'used a coupon, but no used sms_coupon_history row names it'
      FROM oms_order o
     WHERE o.id = ANY (v_ids) AND o.coupon_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM sms_coupon_history h WHERE h.order_sn = o.order_sn);

    SELECT l.skus, l.qtys INTO v_skus, v_qtys FROM stock_lock(v_ids) l;
    IF v_skus IS NOT NULL THEN
        -- lock_stock >= 0 (a CHECK) refuses a second release of the same units.
        UPDATE pms_sku_stock k SET lock_stock = k.lock_stock - u.q
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
         WHERE k.id = ANY (v_skus) AND k.id = u.sku;
    END IF;

    INSERT INTO oms_order_operate_history (order_id, operate_man, order_status, note)
    SELECT x, p_source, 4, 'closed by ordergate: payment window over or closed by operations'
      FROM unnest(v_ids) AS u(x);
    INSERT INTO ordergate_hook_call (event, source, order_sns) VALUES ('cancelled', p_source, v_sns);
END
$$;

-- paid (a payment claim won): the order is paid (status 1, payment_time), its locked units are
-- sold (stock and lock_stock down, sale up); its coupon stays used.
CREATE OR REPLACE FUNCTION mall.hook_paid(order_nos text[], source text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mall, pg_temp AS $$
DECLARE
    p_source  text   := hook_paid.source;
    v_ids     bigint[];
    v_sns     text[];
    v_skus    bigint[];
    v_qtys    int[];
BEGIN
    v_ids := orders_lock(hook_paid.order_nos, 0, 'paid', p_source);
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    UPDATE oms_order o SET status = 1, payment_time = now(), modify_time = now()
     WHERE o.id = ANY (v_ids);
    SELECT array_agg(o.order_sn ORDER BY o.order_sn) INTO v_sns FROM oms_order o WHERE o.id = ANY (v_ids);

    INSERT INTO ordergate_hook_anomaly (event, source, order_sn, problem)
    SELECT 'paid', p_source, o.order_sn, 'used a coupon that is no longer marked used'
      FROM oms_order o
     WHERE o.id = ANY (v_ids) AND o.coupon_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM sms_coupon_history h
                        WHERE h.order_sn = o.order_sn AND h.use_status = 1);

    SELECT l.skus, l.qtys INTO v_skus, v_qtys FROM stock_lock(v_ids) l;
    IF v_skus IS NOT NULL THEN
        UPDATE pms_sku_stock k
           SET stock = k.stock - u.q, lock_stock = k.lock_stock - u.q, sale = k.sale + u.q
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
         WHERE k.id = ANY (v_skus) AND k.id = u.sku;
    END IF;

    INSERT INTO oms_order_operate_history (order_id, operate_man, order_status, note)
    SELECT x, p_source, 1, 'paid' FROM unnest(v_ids) AS u(x);
    INSERT INTO ordergate_hook_call (event, source, order_sns) VALUES ('paid', p_source, v_sns);
END
$$;

-- late_payment (a payment arrived for an order ordergate had cancelled: ordergate recorded the
-- exception and the refund request or review): the order stays closed; the shop notes it, so
-- customer service sees it on the order.
CREATE OR REPLACE FUNCTION mall.hook_late_payment(order_nos text[], source text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mall, pg_temp AS $$
DECLARE
    p_source  text   := hook_late_payment.source;
    v_ids     bigint[];
BEGIN
    v_ids := orders_lock(hook_late_payment.order_nos, 4, 'late_payment', p_source);
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO oms_order_operate_history (order_id, operate_man, order_status, note)
    SELECT x, p_source, 4,
           'payment after the order was closed: ordergate recorded an exception and a refund or review'
      FROM unnest(v_ids) AS u(x);
    INSERT INTO ordergate_hook_call (event, source, order_sns)
    SELECT 'late_payment', p_source, array_agg(o.order_sn ORDER BY o.order_sn)
      FROM oms_order o WHERE o.id = ANY (v_ids);
END
$$;

REVOKE EXECUTE ON FUNCTION mall.orders_lock(text[], int, text, text), mall.stock_lock(bigint[]),
    mall.hook_cancelled(text[], text), mall.hook_paid(text[], text),
    mall.hook_late_payment(text[], text) FROM PUBLIC;
-- ordergate_owner calls the hooks by name: it needs the schema too (and nothing else of it).
GRANT USAGE ON SCHEMA mall TO ordergate_owner;
GRANT EXECUTE ON FUNCTION mall.hook_cancelled(text[], text), mall.hook_paid(text[], text),
    mall.hook_late_payment(text[], text) TO ordergate_owner;

-- Registration, as the installing role (a member of ordergate_admin, the only role that may
-- call add_hook, which also sees schema mall to name the functions). Registering again answers
-- 'exists'.
RESET ROLE;
SELECT ordergate.add_hook('cancelled', 'mall.hook_cancelled(text[],text)');
SELECT ordergate.add_hook('paid', 'mall.hook_paid(text[],text)');
SELECT ordergate.add_hook('late_payment', 'mall.hook_late_payment(text[],text)');
COMMIT;
