-- Adoption by a shop with its own tables (docs/integrate.md): gate-only orders, effect hooks
-- (who runs them, with what, and what a failing one undoes), event payloads, cancel scheduling in
-- the order's transaction, and the refund loop. Bad input changes nothing.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.add_coupon('C1');

-- A shop: its own schema and tables, owned by its own role, that ordergate's roles cannot write.
DROP SCHEMA IF EXISTS shop CASCADE;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shop_owner') THEN CREATE ROLE shop_owner NOLOGIN; END IF;
END $$;
CREATE SCHEMA shop AUTHORIZATION shop_owner;
GRANT ordergate_service TO shop_owner;  -- the hook reads ordergate's orders (read-only, as any service)
SET ROLE shop_owner;
CREATE TABLE shop.orders (order_sn text PRIMARY KEY, status int NOT NULL DEFAULT 0);
CREATE TABLE shop.calls (seq bigserial, hook text, event text, order_nos text[], source text, run_as text, seen int);
-- The recommended model: SECURITY DEFINER, owned by the shop's role, its own search_path.
CREATE FUNCTION shop.on_cancelled(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
BEGIN
    -- seen: how many of its orders the hook finds cancelled in ordergate (its effects come first).
    INSERT INTO calls (hook, event, order_nos, source, run_as, seen)
    VALUES ('on_cancelled', 'cancelled', order_nos, source, current_user,
            (SELECT count(*) FROM ordergate.orders o WHERE o.order_no = ANY (order_nos) AND o.status = 'cancelled'));
    UPDATE orders SET status = 4 WHERE order_sn = ANY (order_nos) AND status = 0;
END $$;
CREATE FUNCTION shop.on_cancelled_second(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
    INSERT INTO calls (hook, event, order_nos, source, run_as) VALUES ('second', 'cancelled', order_nos, source, current_user);
$$;
CREATE FUNCTION shop.on_paid(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
BEGIN
    INSERT INTO calls (hook, event, order_nos, source, run_as) VALUES ('on_paid', 'paid', order_nos, source, current_user);
    UPDATE orders SET status = 1 WHERE order_sn = ANY (order_nos) AND status = 0;
END $$;
CREATE FUNCTION shop.on_late(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
    INSERT INTO calls (hook, event, order_nos, source, run_as) VALUES ('on_late', 'late_payment', order_nos, source, current_user);
$$;
-- Not SECURITY DEFINER: it would run as the claim's role, ordergate_owner; add_hook refuses it
-- (tests/sql/090_hooks.sql has the rest of the checks).
CREATE FUNCTION shop.invoker(order_nos text[], source text) RETURNS void
LANGUAGE sql SET search_path = shop, pg_temp AS $$
    UPDATE shop.orders SET status = 4 WHERE order_sn = ANY (order_nos);
$$;
CREATE FUNCTION shop.broken(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'stock row for % is missing', order_nos[1] USING ERRCODE = 'P0002';
END $$;
CREATE FUNCTION shop.wrong_args(order_nos text) RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION shop.wrong_result(order_nos text[], source text) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE PROCEDURE shop.a_procedure(order_nos text[], source text) LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION shop.not_granted(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT $$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA shop FROM PUBLIC;
REVOKE EXECUTE ON ALL PROCEDURES IN SCHEMA shop FROM PUBLIC;
GRANT USAGE ON SCHEMA shop TO ordergate_owner, ordergate_admin;  -- the admin names the hooks
GRANT EXECUTE ON FUNCTION shop.on_cancelled(text[],text), shop.on_cancelled_second(text[],text),
      shop.on_paid(text[],text), shop.on_late(text[],text), shop.invoker(text[],text),
      shop.broken(text[],text), shop.wrong_args(text), shop.wrong_result(text[],text) TO ordergate_owner;
-- The tests read the shop's tables while acting as the service.
GRANT USAGE ON SCHEMA shop TO ordergate_service;
GRANT SELECT ON ALL TABLES IN SCHEMA shop TO ordergate_service;
RESET ROLE;

------------------------------------------------------------------------------------------------
-- Gate-only orders.
SET ROLE ordergate_service;
SELECT t_eq('gate-only placed', ordergate.place_order('G1', 1500, '[]', NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('gate-only no lines', (SELECT count(*) FROM ordergate.order_items WHERE order_no = 'G1'), 0::bigint);
SELECT t_eq('gate-only stock untouched', (SELECT available FROM ordergate.inventory WHERE sku = 'S1'), 10::bigint);
SELECT t_eq('gate-only duplicate', ordergate.place_order('G1', 1500, '[]', NULL, now()), 'duplicate');
SELECT t_eq('gate-only with a coupon', ordergate.place_order('G2', 700, '[]', 'C1', now() - interval '1 minute'), 'placed');
SELECT t_eq('gate-only coupon locked', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C1'), 'locked');
SELECT t_eq('built-in order beside them', ordergate.place_order('B1', 900, '[{"sku":"S1","qty":2}]', NULL, now() - interval '1 minute'), 'placed');
-- A mix of known and unknown skus is out_of_stock, as an unknown sku always is: nothing written.
SELECT t_eq('known and unknown skus', ordergate.place_order('G3', 100, '[{"sku":"S1","qty":1},{"sku":"SHOP-9","qty":1}]', NULL, now()), 'out_of_stock');
SELECT t_eq('mix leaves no order', (SELECT count(*) FROM ordergate.orders WHERE order_no = 'G3'), 0::bigint);
SELECT t_eq('mix leaves stock', (SELECT available FROM ordergate.inventory WHERE sku = 'S1'), 8::bigint);
SELECT t_error('items not an array', $$SELECT ordergate.place_order('G4', 100, '{}', NULL, now())$$, '22023');
SELECT t_error('items over 1000 lines', $$SELECT ordergate.place_order('G4', 100, (SELECT jsonb_agg(jsonb_build_object('sku', 'S1', 'qty', 1)) FROM generate_series(1, 1001)), NULL, now())$$, '22023');
SELECT t_eq('cancel gate-only and built-in',
    (SELECT string_agg(order_no || ':' || outcome, ' ' ORDER BY order_no) FROM ordergate.claim_cancel(ARRAY['G1', 'G2', 'B1'], 'timeout_scanner')),
    'B1:cancelled G1:cancelled G2:cancelled');
SELECT t_eq('built-in restocked, gate-only untouched', (SELECT available FROM ordergate.inventory WHERE sku = 'S1'), 10::bigint);
SELECT t_eq('gate-only coupon back', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C1'), 'available');
SELECT t_eq('gate-only cancel event items', (SELECT payload::jsonb -> 'items' FROM ordergate.outbox WHERE order_no = 'G1' AND event_type = 'order_cancelled'), '[]'::jsonb);
SELECT t_eq('built-in cancel event', (SELECT (payload::jsonb - 'cancelled_at' - 'actor') FROM ordergate.outbox WHERE order_no = 'B1' AND event_type = 'order_cancelled'),
    '{"v": 1, "event": "order_cancelled", "order_no": "B1", "source": "timeout_scanner", "amount_cents": 900, "coupon_id": null, "items": [{"sku": "S1", "qty": 2}], "shop": null, "currency": "USD"}'::jsonb);
SELECT t_eq('cancel event actor', (SELECT payload ->> 'actor' FROM ordergate.outbox WHERE order_no = 'B1'), current_setting('application_name'));
SELECT t_eq('gate-only paid', (SELECT outcome FROM ordergate.place_order('G5', 400, '[]', NULL, now() + interval '1 hour') p(outcome)), 'placed');
SELECT t_eq('gate-only payment', (SELECT outcome FROM ordergate.claim_payment('G5', 'T-G5', 400, 'card')), 'paid');
SELECT t_eq('paid event', (SELECT (payload::jsonb - 'paid_at' - 'actor') FROM ordergate.outbox WHERE order_no = 'G5'),
    '{"v": 1, "event": "order_paid", "order_no": "G5", "txn_no": "T-G5", "amount_cents": 400, "channel": "card", "source": "payment_callback", "coupon_id": null, "items": [], "shop": null, "currency": "USD"}'::jsonb);
-- The shop's own data (its lines and coupon for a gate-only order) goes verbatim into every event
-- of the order, so a shop that reacts to events can restock from the event alone.
SELECT t_eq('place with shop data', ordergate.place_order('S1', 300, '[]', NULL, now() - interval '1 minute',
    shop => '{"lines": [{"sku_id": 7, "qty": 2}], "coupon_history_id": 3}'), 'placed');
SELECT t_eq('place with shop data, to pay', ordergate.place_order('S2', 300, '[]', NULL, now() + interval '1 hour',
    '{"lines": [{"sku_id": 8, "qty": 1}]}'), 'placed');
SELECT t_eq('place with shop data, to close', ordergate.place_order('S3', 300, '[]', NULL, now() + interval '1 hour',
    '{"lines": [{"sku_id": 9, "qty": 1}], "note": "quote \" and \\ survive"}'), 'placed');
SELECT t_eq('shop data stored', (SELECT shop FROM ordergate.orders WHERE order_no = 'S1'),
    '{"lines": [{"sku_id": 7, "qty": 2}], "coupon_history_id": 3}'::jsonb);
SELECT t_eq('cancel S1', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['S1'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('cancel event carries shop data', (SELECT payload::jsonb -> 'shop' FROM ordergate.outbox WHERE order_no = 'S1' AND event_type = 'order_cancelled'),
    '{"lines": [{"sku_id": 7, "qty": 2}], "coupon_history_id": 3}'::jsonb);
SELECT t_eq('late payment on S1', (SELECT outcome FROM ordergate.claim_payment('S1', 'T-S1', 300, 'card')), 'late_payment');
SELECT t_eq('refund event carries shop data', (SELECT payload::jsonb -> 'shop' FROM ordergate.outbox WHERE order_no = 'S1' AND event_type = 'refund_requested'),
    '{"lines": [{"sku_id": 7, "qty": 2}], "coupon_history_id": 3}'::jsonb);
SELECT t_eq('pay S2', (SELECT outcome FROM ordergate.claim_payment('S2', 'T-S2', 300, 'card')), 'paid');
SELECT t_eq('paid event carries shop data', (SELECT payload::jsonb -> 'shop' FROM ordergate.outbox WHERE order_no = 'S2' AND event_type = 'order_paid'),
    '{"lines": [{"sku_id": 8, "qty": 1}]}'::jsonb);
SELECT t_eq('close S3', (SELECT outcome FROM ordergate.close_order('S3', 'ops', 'asked')), 'cancelled');
SELECT t_eq('close event carries shop data', (SELECT payload::jsonb -> 'shop' FROM ordergate.outbox WHERE order_no = 'S3' AND event_type = 'order_cancelled'),
    '{"lines": [{"sku_id": 9, "qty": 1}], "note": "quote \" and \\ survive"}'::jsonb);
SELECT t_error('shop data not an object', $$SELECT ordergate.place_order('S4', 300, '[]', NULL, now(), '[{"sku_id": 1}]')$$, '22023');
SELECT t_error('shop data over 16 KB', $$SELECT ordergate.place_order('S4', 300, '[]', NULL, now(), jsonb_build_object('x', repeat('a', 16400)))$$, '22023');
SELECT t_eq('refused shop data writes nothing', (SELECT count(*) FROM ordergate.orders WHERE order_no = 'S4'), 0::bigint);
RESET ROLE;
SELECT t_eq('reconcile exact with both kinds', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

------------------------------------------------------------------------------------------------
-- Registering hooks: admin only, the right signature only, a shop function only.
SET ROLE ordergate_service;
SELECT t_error('service may not add a hook', $$SELECT ordergate.add_hook('cancelled', 'shop.on_cancelled(text[],text)')$$, '42501');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_error('unknown event', $$SELECT ordergate.add_hook('shipped', 'shop.on_cancelled(text[],text)')$$, '22023');
SELECT t_error('wrong arguments', $$SELECT ordergate.add_hook('cancelled', 'shop.wrong_args(text)')$$, '22023');
SELECT t_error('wrong result', $$SELECT ordergate.add_hook('cancelled', 'shop.wrong_result(text[],text)')$$, '22023');
SELECT t_error('a procedure', $$SELECT ordergate.add_hook('cancelled', 'shop.a_procedure(text[],text)')$$, '22023');
SELECT t_error('not a function at all', $$SELECT ordergate.add_hook('cancelled', 'shop.nothing(text[],text)')$$, '42883');
SELECT t_error('an ordergate function', $$SELECT ordergate.add_hook('cancelled', 'ordergate._hooks_run(text,text[],text,jsonb)')$$, '22023');
SELECT t_error('owner may not execute it', $$SELECT ordergate.add_hook('cancelled', 'shop.not_granted(text[],text)')$$, '42501');
SELECT t_eq('refusals register nothing', (SELECT count(*) FROM ordergate.hooks), 0::bigint);
SELECT t_eq('add hook', ordergate.add_hook('cancelled', 'shop.on_cancelled(text[],text)'), 'added');
SELECT t_eq('add hook again', ordergate.add_hook('cancelled', 'shop.on_cancelled(text[],text)'), 'exists');
SELECT t_eq('add second hook', ordergate.add_hook('cancelled', 'shop.on_cancelled_second(text[],text)'), 'added');
SELECT t_eq('add paid hook', ordergate.add_hook('paid', 'shop.on_paid(text[],text)'), 'added');
SELECT t_eq('add late hook', ordergate.add_hook('late_payment', 'shop.on_late(text[],text)'), 'added');
SELECT t_eq('registrations', (SELECT string_agg(event || '=' || fn_name, ' ' ORDER BY id) FROM ordergate.hooks),
    'cancelled=shop.on_cancelled(text[],text) cancelled=shop.on_cancelled_second(text[],text) paid=shop.on_paid(text[],text) late_payment=shop.on_late(text[],text)');
RESET ROLE;

-- Hooks are called once per claim statement with exactly its winners, sorted, after ordergate's
-- own effects; losers, duplicates and not_due orders never reach them.
TRUNCATE shop.calls;
SET ROLE ordergate_service;
SELECT ordergate.place_order(x, 100, '[]', NULL, now() - interval '1 minute') FROM unnest(ARRAY['H3', 'H1', 'H2', 'HP', 'HL']) x;
SELECT ordergate.place_order('HN', 100, '[]', NULL, now() + interval '1 hour');
RESET ROLE;
INSERT INTO shop.orders (order_sn) SELECT x FROM unnest(ARRAY['H1', 'H2', 'H3', 'HN', 'HP', 'HL']) x;
SET ROLE ordergate_service;
SELECT t_eq('pay HP', (SELECT outcome FROM ordergate.claim_payment('HP', 'T-HP', 100, 'card')), 'paid');
SELECT t_eq('paid hook once', (SELECT string_agg(hook || ':' || order_nos::text || ':' || source, ' ') FROM shop.calls), 'on_paid:{HP}:payment_callback');
SELECT t_eq('duplicate payment calls no hook', (SELECT outcome FROM ordergate.claim_payment('HP', 'T-HP', 100, 'card')), 'duplicate');
SELECT t_eq('double payment calls no hook', (SELECT outcome FROM ordergate.claim_payment('HP', 'T-HP2', 100, 'card')), 'double_payment');
SELECT t_eq('after duplicate and double', (SELECT count(*) FROM shop.calls), 1::bigint);
SELECT t_eq('batch with losers',
    (SELECT string_agg(order_no || ':' || outcome, ' ') FROM ordergate.claim_cancel(ARRAY['H3', 'HP', 'H1', 'HN', 'NOPE', 'H3', 'H2'], 'timeout_consumer')),
    'H3:cancelled HP:already_paid H1:cancelled HN:not_due NOPE:not_found H2:cancelled');
SELECT t_eq('cancelled hooks in registration order, winners sorted',
    (SELECT string_agg(hook || ':' || order_nos::text || ':' || source, ' ' ORDER BY seq) FROM shop.calls WHERE event = 'cancelled'),
    'on_cancelled:{H1,H2,H3}:timeout_consumer second:{H1,H2,H3}:timeout_consumer');
SELECT t_eq('hook ran as the shop owner', (SELECT string_agg(DISTINCT run_as, ',') FROM shop.calls), 'shop_owner');
SELECT t_eq('hook wrote the shop rows', (SELECT string_agg(order_sn || '=' || status, ',' ORDER BY order_sn) FROM shop.orders),
    'H1=4,H2=4,H3=4,HL=0,HN=0,HP=1');
SELECT t_eq('hook runs after ordergate effects', (SELECT seen FROM shop.calls c WHERE c.hook = 'on_cancelled'), 3);
SELECT t_eq('claim again: no winner, no call',
    (SELECT string_agg(outcome, ',') FROM ordergate.claim_cancel(ARRAY['H1', 'H2'], 'timeout_scanner')), 'already_cancelled,already_cancelled');
SELECT t_eq('no call without winners', (SELECT count(*) FROM shop.calls WHERE event = 'cancelled'), 2::bigint);
SELECT t_eq('late payment', (SELECT outcome FROM ordergate.claim_payment('H1', 'T-H1', 100, 'card')), 'late_payment');
SELECT t_eq('late hook', (SELECT string_agg(hook || ':' || order_nos::text, ' ') FROM shop.calls WHERE event = 'late_payment'), 'on_late:{H1}');
SELECT t_eq('manual close calls cancelled hooks', (SELECT outcome FROM ordergate.close_order('HN', 'ops', 'customer asked')), 'cancelled');
SELECT t_eq('manual source', (SELECT string_agg(hook || ':' || order_nos::text || ':' || source, ' ' ORDER BY seq) FROM shop.calls WHERE order_nos = '{HN}'),
    'on_cancelled:{HN}:manual second:{HN}:manual');
RESET ROLE;

-- A hook that raises rolls the whole claim back, with its SQLSTATE and a message naming it.
SET ROLE ordergate_admin;
SELECT t_eq('add broken hook', ordergate.add_hook('cancelled', 'shop.broken(text[],text)'), 'added');
RESET ROLE;
TRUNCATE shop.calls;
CREATE FUNCTION pg_temp.claim_error(p_nos text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text; v_table text;
BEGIN
    PERFORM ordergate.claim_cancel(p_nos, 'timeout_consumer');
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_table = TABLE_NAME;
    RETURN v_state || '|' || v_table || '|' || v_msg;
END $$;
SELECT t_eq('broken hook fails the claim', pg_temp.claim_error(ARRAY['HL']),
    'P0002|hooks|hook shop.broken(text[],text): stock row for HL is missing');
SELECT t_eq('nothing claimed', (SELECT status FROM ordergate.orders WHERE order_no = 'HL'), 'pending_payment');
SELECT t_eq('no log row', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'HL'), 0::bigint);
SELECT t_eq('no outbox event', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'HL' AND event_type = 'order_cancelled'), 0::bigint);
SELECT t_eq('earlier hooks undone', (SELECT count(*) FROM shop.calls), 0::bigint);
SELECT t_eq('shop row undone', (SELECT status FROM shop.orders WHERE order_sn = 'HL'), 0);
SET ROLE ordergate_admin;
SELECT t_eq('drop broken hook', ordergate.drop_hook('cancelled', 'shop.broken(text[],text)'), 'dropped');
SELECT t_eq('drop it again', ordergate.drop_hook('cancelled', 'shop.broken(text[],text)'), 'not_found');
-- A hook that is not SECURITY DEFINER would run as ordergate_owner: refused.
SELECT t_error('invoker hook refused', $$SELECT ordergate.add_hook('cancelled', 'shop.invoker(text[],text)')$$, '22023');
SELECT t_eq('invoker hook not registered', (SELECT count(*) FROM ordergate.hooks WHERE fn_name = 'shop.invoker(text[],text)'), 0::bigint);
RESET ROLE;

-- A hook function dropped from under its registration (CASCADE: the registration's operator
-- depends on it): the claim fails naming it; drop_hook(id) removes the registration.
SELECT t_error('a registered hook is not dropped without CASCADE', $$DROP FUNCTION shop.on_cancelled_second(text[], text)$$, '2BP01');
DROP FUNCTION shop.on_cancelled_second(text[], text) CASCADE;
SELECT t_eq('dropped hook fails the claim', pg_temp.claim_error(ARRAY['HL']),
    '42883|hooks|hook shop.on_cancelled_second(text[],text): the function registered for event cancelled no longer exists');
SELECT t_eq('still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'HL'), 'pending_payment');
SET ROLE ordergate_admin;
SELECT t_eq('drop dangling by id', ordergate.drop_hook((SELECT id FROM ordergate.hooks WHERE fn_name = 'shop.on_cancelled_second(text[],text)')), 'dropped');
SELECT t_eq('drop unknown id', ordergate.drop_hook(99999::bigint), 'not_found');
RESET ROLE;
SELECT t_eq('claim works again', pg_temp.claim_error(ARRAY['HL']), 'no error');
SELECT t_eq('HL cancelled once', (SELECT string_agg(hook || ':' || order_nos::text, ' ') FROM shop.calls), 'on_cancelled:{HL}');
SELECT t_eq('reconcile clean after hooks', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

------------------------------------------------------------------------------------------------
-- Scheduling the cancel in the order's transaction (og_reset keeps hooks: remove the shop's).
SET ROLE ordergate_admin;
SELECT t_eq('drop remaining hooks', (SELECT string_agg(ordergate.drop_hook(id), ',') FROM ordergate.hooks), 'dropped,dropped,dropped');
RESET ROLE;
SELECT og_reset();
SET ROLE ordergate_service;
SELECT t_eq('scheduling off: no event', ordergate.place_order('Q0', 100, '[]', NULL, now() + interval '10 minutes'), 'placed');
SELECT t_eq('scheduling off writes nothing', (SELECT count(*) FROM ordergate.outbox), 0::bigint);
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_error('schedule_cancels is 0 or 1', $$SELECT ordergate.set_setting('schedule_cancels', '2')$$, '22023');
SELECT t_eq('turn scheduling on', ordergate.set_setting('schedule_cancels', '1'), '0');
-- Q1 is due in 2030: beyond the default horizon of 366 days.
SELECT t_eq('horizon of 10 years', ordergate.set_setting('max_deadline_seconds', '315360000'), '31622400');
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('scheduled place', ordergate.place_order('Q1', 100, '[]', NULL, '2030-01-02 03:04:05.123456+00'), 'placed');
SELECT t_eq('cancel message', (SELECT event_type || ' ' || payload::text FROM ordergate.outbox WHERE order_no = 'Q1'),
    'cancel_scheduled {"v" : 1, "order_no" : "Q1", "due_at" : "2030-01-02T03:04:05.123456Z"}');
SELECT t_eq('due_at is expire_at to the microsecond',
    (SELECT (payload ->> 'due_at')::timestamptz = o.expire_at FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no) WHERE b.order_no = 'Q1'), true);
SELECT t_eq('duplicate schedules nothing', ordergate.place_order('Q1', 100, '[]', NULL, now()), 'duplicate');
SELECT t_eq('refused place schedules nothing', ordergate.place_order('Q2', 100, '[{"sku":"NOPE","qty":1}]', NULL, now()), 'out_of_stock');
SELECT t_eq('one event so far', (SELECT count(*) FROM ordergate.outbox), 1::bigint);
SELECT t_eq('place Q3', ordergate.place_order('Q3', 100, '[]', NULL, now() + interval '10 seconds'), 'placed');
SELECT t_eq('hold Q3', (SELECT outcome FROM ordergate.hold_for_payment('Q3', 120)), 'held');
-- Q3's cancel message is not published yet: the hold rewrites it (one message per order).
SELECT t_eq('hold schedules the new deadline',
    (SELECT array_agg((payload ->> 'due_at')::timestamptz ORDER BY id) = ARRAY[o.expire_at]
       FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no) WHERE b.order_no = 'Q3' GROUP BY o.original_expire_at, o.expire_at), true);
-- A hold that does not move the deadline (Q1 is due in 2030, far beyond now + 60 s) schedules nothing.
SELECT t_eq('hold without a move', (SELECT outcome FROM ordergate.hold_for_payment('Q1', 60)), 'held');
SELECT t_eq('no event for an unmoved deadline', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'Q1'), 1::bigint);
RESET ROLE;
SELECT t_eq('scheduling keeps the books', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

------------------------------------------------------------------------------------------------
-- The refund loop.
SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.add_coupon('C9');
SET ROLE ordergate_service;
SELECT ordergate.place_order('R1', 1000, '[{"sku":"S1","qty":1}]', 'C9', now() - interval '1 minute');
SELECT ordergate.place_order('R2', 2000, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('R3', 9000, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('R4', 500, '[]', NULL, now() + interval '1 hour');
SELECT count(*) FROM ordergate.claim_cancel(ARRAY['R1', 'R2', 'R3'], 'timeout_consumer');
SELECT t_eq('late R1', (SELECT outcome FROM ordergate.claim_payment('R1', 'T-R1', 1000, 'card')), 'late_payment');
SELECT t_eq('late R2', (SELECT outcome FROM ordergate.claim_payment('R2', 'T-R2', 2000, 'card')), 'late_payment');
SELECT t_eq('late R3 over the limit', (SELECT outcome FROM ordergate.claim_payment('R3', 'T-R3', 9000, 'card')), 'late_payment');
SELECT t_eq('paid R4', (SELECT outcome FROM ordergate.claim_payment('R4', 'T-R4', 500, 'card')), 'paid');
SELECT t_eq('refund event', (SELECT (payload::jsonb - 'actor' - 'exception_id') FROM ordergate.outbox WHERE order_no = 'R1' AND event_type = 'refund_requested'),
    '{"v": 1, "event": "refund_requested", "order_no": "R1", "txn_no": "T-R1", "amount_cents": 1000, "channel": "card", "kind": "late_payment", "resolution": "auto_refund", "order_status": "cancelled", "source": "payment_callback", "coupon_id": "C9", "items": [{"sku": "S1", "qty": 1}], "shop": null, "currency": "USD"}'::jsonb);
SELECT t_eq('refund succeeded', (SELECT result || ':' || state || ':' || resolution FROM ordergate.record_refund('T-R1', 'RF-1', 'succeeded')), 'refunded:refunded:auto_refund');
SELECT t_eq('same report again', (SELECT result FROM ordergate.record_refund('T-R1', 'RF-1', 'succeeded')), 'duplicate');
SELECT t_eq('same ref, other outcome', (SELECT result FROM ordergate.record_refund('T-R1', 'RF-1', 'failed')), 'conflict');
SELECT t_eq('same ref, other txn', (SELECT result FROM ordergate.record_refund('T-R2', 'RF-1', 'succeeded')), 'conflict');
SELECT t_eq('second success', (SELECT result FROM ordergate.record_refund('T-R1', 'RF-1b', 'succeeded')), 'already_refunded');
SELECT t_eq('refund failed', (SELECT result || ':' || state || ':' || resolution FROM ordergate.record_refund('T-R2', 'RF-2', 'failed')), 'manual_review:open:manual_review');
SELECT t_eq('failure alerts', (SELECT payload ->> 'kind' FROM ordergate.outbox WHERE order_no = 'R2' AND event_type = 'reconciliation_alert'), 'refund_failed');
SELECT t_eq('retry succeeded', (SELECT result FROM ordergate.record_refund('T-R2', 'RF-2b', 'succeeded')), 'refunded');
SELECT t_eq('manual review from the start', (SELECT result FROM ordergate.record_refund('T-R3', 'RF-3', 'succeeded')), 'not_requested');
SELECT t_eq('paid payment has no refund', (SELECT result FROM ordergate.record_refund('T-R4', 'RF-4', 'succeeded')), 'not_requested');
SELECT t_eq('unknown txn', (SELECT result FROM ordergate.record_refund('T-NONE', 'RF-5', 'succeeded')), 'not_found');
SELECT t_error('bad outcome', $$SELECT * FROM ordergate.record_refund('T-R1', 'RF-6', 'maybe')$$, '22023');
SELECT t_error('bad refund_ref', $$SELECT * FROM ordergate.record_refund('T-R1', 'RF 6', 'failed')$$, '22023');
SELECT t_error('missing txn', $$SELECT * FROM ordergate.record_refund(NULL, 'RF-6', 'failed')$$, '22023');
SELECT t_eq('refunds recorded', (SELECT string_agg(refund_ref || '=' || outcome, ',' ORDER BY refund_ref) FROM ordergate.refunds), 'RF-1=succeeded,RF-2=failed,RF-2b=succeeded');
SELECT t_eq('exceptions after', (SELECT string_agg(txn_no || '=' || state || '/' || resolution, ',' ORDER BY txn_no) FROM ordergate.exceptions), 'T-R1=refunded/auto_refund,T-R2=refunded/manual_review,T-R3=open/manual_review');
SELECT t_error('service writes no refund directly', $$INSERT INTO ordergate.refunds (refund_ref, txn_no, exception_id, outcome) VALUES ('X', 'T-R3', 3, 'failed')$$, '42501');
RESET ROLE;
SELECT t_eq('refund books clean', t_viol(8), 0::bigint);
SELECT t_eq('nothing overdue', (SELECT refunds_unconfirmed || '/' || reviews_overdue FROM ordergate.exceptions_overdue()), '0/0');

-- Overdue: an unconfirmed auto-refund older than refund_confirm_seconds, a review older than
-- manual_review_max_age_seconds. Only those alert, not every open row.
SET ROLE ordergate_service;
SELECT ordergate.place_order('R5', 100, '[]', NULL, now() - interval '1 minute');
SELECT count(*) FROM ordergate.claim_cancel(ARRAY['R5'], 'timeout_consumer');
SELECT t_eq('late R5', (SELECT outcome FROM ordergate.claim_payment('R5', 'T-R5', 100, 'card')), 'late_payment');
RESET ROLE;
SELECT t_eq('fresh auto-refund is on time', (SELECT refunds_unconfirmed || '/' || reviews_overdue FROM ordergate.exceptions_overdue()), '0/0');
SELECT t_eq('fresh auto-refund is no violation', t_viol(8), 0::bigint);
UPDATE ordergate.exceptions SET created_at = now() - interval '2 days' WHERE txn_no IN ('T-R5');
UPDATE ordergate.exceptions SET created_at = now() - interval '4 days' WHERE txn_no IN ('T-R3');
SELECT t_eq('overdue counts', (SELECT refunds_unconfirmed || '/' || reviews_overdue FROM ordergate.exceptions_overdue()), '1/1');
SELECT t_eq('overdue auto-refund is a violation', (SELECT violations || ':' || sample::text FROM ordergate.reconcile() WHERE invariant = 8), '1:{T-R5}');
-- A refunded exception without a successful refund row (an ad-hoc repair) is found as well.
UPDATE ordergate.exceptions SET state = 'refunded' WHERE txn_no = 'T-R3';
SELECT t_eq('refunded without a refund', (SELECT violations FROM ordergate.reconcile() WHERE invariant = 8), 2::bigint);
