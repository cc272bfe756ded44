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
-- A hook that raises rolls the whole claim back: so each hook checks that the shop's rows are in
-- the state the transition needs and raises otherwise (the order then stays pending in ordergate
-- and the mismatch is visible, instead of a cancel that released nothing).
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

-- Locks the shop's orders p_sns (FOR UPDATE, by order_sn ascending) and returns their ids in that
-- order. Raises when one is missing or not in p_status: the transition p_event does not fit the
-- shop's books. Not SECURITY DEFINER: only the hooks (running as mall_owner) call it.
CREATE OR REPLACE FUNCTION mall.orders_lock(p_sns text[], p_status int, p_event text)
RETURNS bigint[]
LANGUAGE plpgsql SET search_path = mall, pg_temp AS $$
DECLARE
    v_ids    bigint[];
    v_n      int;
    v_want   int;
    v_bad    text;
BEGIN
    SELECT array_agg(l.id ORDER BY l.order_sn),
           count(*),
           string_agg(format('%s (status %s)', l.order_sn, l.status), ', ' ORDER BY l.order_sn)
               FILTER (WHERE l.status <> p_status)
      INTO v_ids, v_n, v_bad
      FROM (SELECT o.id, o.order_sn, o.status
              FROM oms_order o
             WHERE o.order_sn = ANY (p_sns)
             ORDER BY o.order_sn
               FOR UPDATE) l;
    SELECT count(DISTINCT x) INTO v_want FROM unnest(p_sns) AS u(x);
    IF v_n <> v_want THEN
        RAISE EXCEPTION 'mall hook %: % of % orders are unknown to oms_order (first: %)',
            p_event, v_want - v_n, v_want,
            (SELECT min(x) FROM unnest(p_sns) AS u(x)
              WHERE NOT EXISTS (SELECT 1 FROM oms_order o WHERE o.order_sn = u.x));
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'mall hook %: orders not in status % in oms_order: %', p_event, p_status,
            left(v_bad, 400);
    END IF;
    RETURN v_ids;
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
    p_sns     text[] := hook_cancelled.order_nos;
    p_source  text   := hook_cancelled.source;
    v_ids     bigint[];
    v_with    int;
    v_back    int;
    v_skus    bigint[];
    v_qtys    int[];
BEGIN
    v_ids := orders_lock(p_sns, 0, 'cancelled');
    UPDATE oms_order o SET status = 4, modify_time = now() WHERE o.id = ANY (v_ids);

    SELECT count(*) INTO v_with FROM oms_order o WHERE o.id = ANY (v_ids) AND o.coupon_id IS NOT NULL;
    PERFORM 1 FROM sms_coupon_history h
     WHERE h.order_sn = ANY (p_sns) AND h.use_status = 1
     ORDER BY h.id
       FOR UPDATE;
    UPDATE sms_coupon_history h SET use_status = 0
     WHERE h.order_sn = ANY (p_sns) AND h.use_status = 1;
    GET DIAGNOSTICS v_back = ROW_COUNT;
    IF v_back <> v_with THEN
        RAISE EXCEPTION 'mall hook cancelled: % orders used a coupon, % used coupons found', v_with, v_back;
    END IF;

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
    INSERT INTO ordergate_hook_call (event, source, order_sns) VALUES ('cancelled', p_source, p_sns);
END
$$;

-- paid (a payment claim won): the order is paid (status 1, payment_time), its locked units are
-- sold (stock and lock_stock down, sale up); its coupon stays used.
CREATE OR REPLACE FUNCTION mall.hook_paid(order_nos text[], source text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mall, pg_temp AS $$
DECLARE
    p_sns     text[] := hook_paid.order_nos;
    p_source  text   := hook_paid.source;
    v_ids     bigint[];
    v_lost    text;
    v_skus    bigint[];
    v_qtys    int[];
BEGIN
    v_ids := orders_lock(p_sns, 0, 'paid');
    UPDATE oms_order o SET status = 1, payment_time = now(), modify_time = now()
     WHERE o.id = ANY (v_ids);

    SELECT min(o.order_sn) INTO v_lost
      FROM oms_order o
     WHERE o.id = ANY (v_ids) AND o.coupon_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM sms_coupon_history h
                        WHERE h.order_sn = o.order_sn AND h.use_status = 1);
    IF v_lost IS NOT NULL THEN
        RAISE EXCEPTION 'mall hook paid: order % used a coupon that is no longer marked used', v_lost;
    END IF;

    SELECT l.skus, l.qtys INTO v_skus, v_qtys FROM stock_lock(v_ids) l;
    IF v_skus IS NOT NULL THEN
        UPDATE pms_sku_stock k
           SET stock = k.stock - u.q, lock_stock = k.lock_stock - u.q, sale = k.sale + u.q
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
         WHERE k.id = ANY (v_skus) AND k.id = u.sku;
    END IF;

    INSERT INTO oms_order_operate_history (order_id, operate_man, order_status, note)
    SELECT x, p_source, 1, 'paid' FROM unnest(v_ids) AS u(x);
    INSERT INTO ordergate_hook_call (event, source, order_sns) VALUES ('paid', p_source, p_sns);
END
$$;

-- late_payment (a payment arrived for an order ordergate had cancelled: ordergate recorded the
-- exception and the refund request or review): the order stays closed; the shop notes it, so
-- customer service sees it on the order.
CREATE OR REPLACE FUNCTION mall.hook_late_payment(order_nos text[], source text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mall, pg_temp AS $$
DECLARE
    p_sns     text[] := hook_late_payment.order_nos;
    p_source  text   := hook_late_payment.source;
    v_ids     bigint[];
BEGIN
    v_ids := orders_lock(p_sns, 4, 'late_payment');
    INSERT INTO oms_order_operate_history (order_id, operate_man, order_status, note)
    SELECT x, p_source, 4,
           'payment after the order was closed: ordergate recorded an exception and a refund or review'
      FROM unnest(v_ids) AS u(x);
    INSERT INTO ordergate_hook_call (event, source, order_sns) VALUES ('late_payment', p_source, p_sns);
END
$$;

REVOKE EXECUTE ON FUNCTION mall.orders_lock(text[], int, text), mall.stock_lock(bigint[]),
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
