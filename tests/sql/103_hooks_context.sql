-- Hooks with context and the shop's checks (schema/README.md, "Effect hooks" and "Shop checks"):
-- a hook may be fn(order_nos, source) or fn(order_nos, source, context); both run side by side,
-- the three-argument one with each order's details for the event that called it (a timeout, a
-- manual close, a payment, a late, double, mismatched, other-currency or unknown-order payment,
-- a refund result). A hostile three-argument hook is refused as a two-argument one is, and the
-- registered function is the one called whatever overloads appear. add_check registers a shop
-- check that reconcile() runs as shop:<name> after the built-in invariants: its rows are
-- counted as violations, a check that fails (raises, changed, dropped) is reported with -1,
-- never skipped; add_check refuses what add_hook refuses.

SELECT og_reset();
SELECT ordergate.add_stock('K1', 10);
SELECT ordergate.set_setting('auto_refund_limit_cents', '5000');

DROP SCHEMA IF EXISTS hc CASCADE;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hc_shop') THEN CREATE ROLE hc_shop NOLOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hc_insider') THEN CREATE ROLE hc_insider NOLOGIN; END IF;
END $$;
GRANT ordergate_owner TO hc_insider;
CREATE SCHEMA hc AUTHORIZATION hc_shop;
-- A shop check compares the shop's books with ordergate's: it reads them.
GRANT USAGE ON SCHEMA ordergate TO hc_shop;
GRANT SELECT ON ordergate.inventory TO hc_shop;
GRANT USAGE ON SCHEMA hc TO ordergate_owner, ordergate_admin, ordergate_service;
SET ROLE hc_shop;
CREATE TABLE hc.calls (seq bigserial, fn text, order_nos text[], source text, context jsonb);
-- The shop's own stock, for a check.
CREATE TABLE hc.stock (sku text PRIMARY KEY, qty bigint NOT NULL);
INSERT INTO hc.stock VALUES ('K1', 10);
GRANT SELECT ON ALL TABLES IN SCHEMA hc TO ordergate_service;
CREATE FUNCTION hc.two(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source) VALUES ('two', order_nos, source);
$$;
CREATE FUNCTION hc.three(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, context) VALUES ('three', order_nos, source, context);
$$;
-- Hostile or malformed three-argument functions.
CREATE FUNCTION hc.invoker3(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SET search_path = hc, pg_temp AS $$ SELECT $$;
CREATE FUNCTION hc.no_path3(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER AS $$ SELECT $$;
CREATE FUNCTION hc.json3(order_nos text[], source text, context json) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT $$;
CREATE FUNCTION hc.four(order_nos text[], source text, context jsonb, x int) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT $$;
-- Checks: the recommended form, one that raises, and malformed ones.
CREATE FUNCTION hc.check_stock() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = hc, pg_temp AS $$
    SELECT format('sku %s: shop %s, ordergate %s', s.sku, s.qty, i.available)
      FROM stock s JOIN ordergate.inventory i ON i.sku = s.sku
     WHERE s.qty <> i.available
     ORDER BY s.sku;
$$;
CREATE FUNCTION hc.check_raises() RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = hc, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'the shop''s books are unreadable';
END $$;
CREATE FUNCTION hc.check_invoker() RETURNS TABLE (detail text)
LANGUAGE sql SET search_path = hc, pg_temp AS $$ SELECT 'x' $$;
CREATE FUNCTION hc.check_no_path() RETURNS TABLE (detail text)
LANGUAGE sql SECURITY DEFINER AS $$ SELECT 'x' $$;
CREATE FUNCTION hc.check_int() RETURNS SETOF int
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT 1 $$;
CREATE FUNCTION hc.check_arg(x int) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT 'x' $$;
CREATE FUNCTION hc.check_private() RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT 'x' $$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA hc FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hc TO ordergate_owner;
RESET ROLE;
CREATE FUNCTION hc.by_owner3(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT $$;
ALTER FUNCTION hc.by_owner3(text[], text, jsonb) OWNER TO ordergate_owner;
CREATE FUNCTION hc.by_insider3(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT $$;
ALTER FUNCTION hc.by_insider3(text[], text, jsonb) OWNER TO hc_insider;
CREATE FUNCTION hc.check_super() RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT 'x' $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hc TO ordergate_owner;
REVOKE EXECUTE ON FUNCTION hc.check_private() FROM ordergate_owner;

CREATE FUNCTION pg_temp.add_error(p_event text, p_fn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text;
BEGIN
    RETURN ordergate.add_hook(p_event, p_fn::regprocedure);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
    RETURN v_state || '|' || v_msg;
END $$;
CREATE FUNCTION pg_temp.check_error(p_name text, p_fn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text;
BEGIN
    RETURN ordergate.add_check(p_name, p_fn::regprocedure)::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
    RETURN v_state || '|' || v_msg;
END $$;
CREATE FUNCTION pg_temp.claim_error(p_nos text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text; v_table text;
BEGIN
    PERFORM ordergate.claim_cancel(p_nos, 'timeout_consumer');
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_table = TABLE_NAME;
    RETURN v_state || '|' || v_table || '|' || v_msg;
END $$;
-- The last context the three-argument hook got for an order.
CREATE FUNCTION pg_temp.ctx(p_no text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT c.context -> p_no FROM hc.calls c WHERE c.fn = 'three' AND p_no = ANY (c.order_nos)
     ORDER BY c.seq DESC LIMIT 1
$$;

------------------------------------------------------------------------------------------------
-- Registration: every event, both forms; the hostile three-argument ones refused, nothing
-- registered by a refusal.
SET ROLE ordergate_admin;
SELECT t_eq('3-arg SECURITY INVOKER refused', pg_temp.add_error('cancelled', 'hc.invoker3(text[],text,jsonb)'),
    '22023|add_hook: hc.invoker3(text[],text,jsonb) refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
SELECT t_eq('3-arg without search_path refused', pg_temp.add_error('cancelled', 'hc.no_path3(text[],text,jsonb)'),
    '22023|add_hook: hc.no_path3(text[],text,jsonb) refused: it does not pin its own search_path (SET search_path = ...), so it would use ordergate''s');
SELECT t_eq('3-arg owned by ordergate_owner refused', pg_temp.add_error('cancelled', 'hc.by_owner3(text[],text,jsonb)'),
    '22023|add_hook: hc.by_owner3(text[],text,jsonb) refused: it is owned by ordergate_owner, an ordergate role');
SELECT t_eq('3-arg owned by a member of ordergate_owner refused', pg_temp.add_error('cancelled', 'hc.by_insider3(text[],text,jsonb)'),
    '22023|add_hook: hc.by_insider3(text[],text,jsonb) refused: its owner hc_insider is a member of ordergate_owner');
SELECT t_eq('context json (not jsonb) refused', pg_temp.add_error('cancelled', 'hc.json3(text[],text,json)'),
    '22023|add_hook: hc.json3(text[],text,json) refused: it must be a function (order_nos text[], source text) or (order_nos text[], source text, context jsonb) RETURNS void');
SELECT t_eq('four arguments refused', split_part(pg_temp.add_error('cancelled', 'hc.four(text[],text,jsonb,integer)'), '|', 1), '22023');
SELECT t_eq('unknown event refused', split_part(pg_temp.add_error('reminded', 'hc.three(text[],text,jsonb)'), '|', 1), '22023');
SELECT t_eq('a function that does not exist', pg_temp.add_error('paid', '999999999'),
    '22023|add_hook: no function with oid 999999999');
SELECT t_eq('refusals register nothing', (SELECT count(*) FROM ordergate.hooks), 0::bigint);
SELECT t_eq('refusals leave no operator or wrapper',
    (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'ordergate_hooks'::regnamespace)
    + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'ordergate_hooks'::regnamespace), 0::bigint);
SELECT t_eq('add 2-arg cancelled', ordergate.add_hook('cancelled', 'hc.two(text[],text)'), 'added');
SELECT t_eq('add 3-arg on every event',
    (SELECT string_agg(ordergate.add_hook(e, 'hc.three(text[],text,jsonb)'), ',' ORDER BY e)
       FROM unnest(ARRAY['amended', 'cancelled', 'deadline_changed', 'late_payment', 'paid',
                         'payment_exception', 'refund_result', 'released']) e),
    'added,added,added,added,added,added,added,added');
SELECT t_eq('add 3-arg again', ordergate.add_hook('paid', 'hc.three(text[],text,jsonb)'), 'exists');
RESET ROLE;
SELECT t_eq('registered forms', (SELECT string_agg(DISTINCT fn_name || '=' || nargs, ',') FROM ordergate.hooks),
    'hc.three(text[],text,jsonb)=3,hc.two(text[],text)=2');
SELECT t_eq('each 3-arg operator calls a wrapper that depends on the hook',
    (SELECT count(*) FROM ordergate.hooks k
       JOIN pg_operator o ON o.oprnamespace = 'ordergate_hooks'::regnamespace AND o.oprname = k.opname
       JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = o.oprcode
                       AND d.refclassid = 'pg_proc'::regclass AND d.refobjid = k.fn
      WHERE k.nargs = 3 AND o.oprright = 'ordergate_hooks.hook_call'::regtype), 8::bigint);
SELECT t_eq('wrappers owned by ordergate_owner, executable by nobody else',
    (SELECT bool_and(p.proowner = 'ordergate_owner'::regrole AND NOT has_function_privilege('ordergate_admin', p.oid, 'EXECUTE'))
       FROM pg_proc p WHERE p.pronamespace = 'ordergate_hooks'::regnamespace), true);

------------------------------------------------------------------------------------------------
-- cancelled: a timeout (captured part included) and a manual close.
SET ROLE ordergate_service;
SELECT ordergate.place_order('C1', 300, '[{"sku":"K1","qty":1}]', NULL, now() - interval '1 minute', '{"shop_id": 1}');
SELECT ordergate.place_order('C2', 300, '[]', NULL, now() - interval '1 minute', '{"shop_id": 2}', NULL, true);
SELECT t_eq('part of C2', (SELECT outcome FROM ordergate.claim_payment('C2', 'T-C2a', 100, 'card')), 'partial');
SELECT t_eq('timeout cancel with both hooks', pg_temp.claim_error(ARRAY['C2', 'C1']), 'no error');
SELECT ordergate.place_order('M1', 300, '[]', NULL, now() + interval '1 hour', '{"shop_id": 3}');
SELECT t_eq('manual close', (SELECT outcome FROM ordergate.close_order('M1', 'ops-anna', 'customer asked')), 'cancelled');
RESET ROLE;
SELECT t_eq('2-arg hook: order numbers and source, as before',
    (SELECT string_agg(order_nos::text || ':' || source, ' ' ORDER BY seq) FROM hc.calls WHERE fn = 'two'),
    '{C1,C2}:timeout_consumer {M1}:manual');
SELECT t_eq('3-arg hook: same orders and source',
    (SELECT string_agg(order_nos::text || ':' || source, ' ' ORDER BY seq) FROM hc.calls WHERE fn = 'three'),
    '{C1,C2}:timeout_consumer {M1}:manual');
SELECT t_eq('timeout context: shop data', pg_temp.ctx('C1') -> 'shop', '{"shop_id": 1}'::jsonb);
SELECT t_eq('timeout context: no operator', pg_temp.ctx('C1') -> 'operator', 'null'::jsonb);
SELECT t_eq('timeout context: captured part', pg_temp.ctx('C2') ->> 'captured_cents', '100');
SELECT t_eq('timeout context: its currency', pg_temp.ctx('C2') ->> 'currency', 'USD');
SELECT t_eq('manual close context', pg_temp.ctx('M1') - 'actor'::text - 'captured_cents'::text - 'currency'::text,
    '{"shop": {"shop_id": 3}, "operator": "ops-anna", "reason": "customer asked"}'::jsonb);

------------------------------------------------------------------------------------------------
-- paid (a card payment, a staff payment), late_payment, and payment_exception for each kind.
SET ROLE ordergate_service;
SELECT ordergate.place_order('P1', 500, '[]', NULL, now() + interval '1 hour', '{"shop_id": 4}');
SELECT ordergate.place_order('P2', 500, '[]', NULL, now() + interval '1 hour');
SELECT t_eq('pay P1', (SELECT outcome FROM ordergate.claim_payment('P1', 'T-P1', 500, 'card')), 'paid');
SELECT t_eq('staff pay P2', (SELECT outcome FROM ordergate.claim_payment('P2', 'T-P2', 500, 'manual', NULL, NULL, 'ops-ben', 'cash at the till')), 'paid');
SELECT t_eq('late payment', (SELECT outcome FROM ordergate.claim_payment('M1', 'T-M1', 300, 'card')), 'late_payment');
SELECT t_eq('double payment', (SELECT outcome FROM ordergate.claim_payment('P1', 'T-P1b', 500, 'card')), 'double_payment');
SELECT ordergate.place_order('X1', 500, '[]', NULL, now() + interval '1 hour');
SELECT t_eq('amount mismatch', (SELECT outcome FROM ordergate.claim_payment('X1', 'T-X1', 499, 'card')), 'amount_mismatch');
SELECT t_eq('currency mismatch', (SELECT outcome FROM ordergate.claim_payment('X1', 'T-X1c', 500, 'card', 'EUR')), 'currency_mismatch');
SELECT t_eq('unknown order', (SELECT outcome FROM ordergate.claim_payment('NOPE', 'T-NOPE', 500, 'card')), 'not_found');
SELECT t_eq('a duplicate runs no hook', (SELECT outcome FROM ordergate.claim_payment('P1', 'T-P1', 500, 'card')), 'duplicate');
RESET ROLE;
SELECT t_eq('paid context',
    (SELECT c.context -> 'P1' FROM hc.calls c WHERE c.fn = 'three' AND c.source = 'payment_callback' AND c.order_nos = '{P1}' ORDER BY seq LIMIT 1)
      - 'exception_id'::text - 'kind'::text - 'resolution'::text,
    '{"txn_no": "T-P1", "amount_cents": 500, "currency": "USD", "channel": "card", "outcome": "paid",
      "operator": null, "reason": null, "charge_ref": null, "shop": {"shop_id": 4}}'::jsonb);
SELECT t_eq('staff payment: source and context', (SELECT source || ' ' || (context -> 'P2' ->> 'operator') || ' ' || (context -> 'P2' ->> 'reason')
    FROM hc.calls WHERE fn = 'three' AND order_nos = '{P2}'), 'manual_payment ops-ben cash at the till');
SELECT t_eq('late payment context', (SELECT (context -> 'M1' ->> 'outcome') || ' ' || (context -> 'M1' ->> 'kind') || ' '
    || ((context -> 'M1' ->> 'exception_id')::bigint = (SELECT id FROM ordergate.exceptions WHERE txn_no = 'T-M1'))
    FROM hc.calls WHERE fn = 'three' AND context -> 'M1' ->> 'txn_no' = 'T-M1'), 'late_payment late_payment true');
SELECT t_eq('payment_exception: each kind once, with its exception',
    (SELECT string_agg(c.source || ':' || (c.context -> c.order_nos[1] ->> 'outcome') || ':' || (c.context -> c.order_nos[1] ->> 'kind')
                       || ':' || ((c.context -> c.order_nos[1] ->> 'exception_id')::bigint = x.id), ' ' ORDER BY c.seq)
       FROM hc.calls c JOIN ordergate.exceptions x ON x.txn_no = c.context -> c.order_nos[1] ->> 'txn_no'
      WHERE c.fn = 'three' AND c.context -> c.order_nos[1] ->> 'outcome' IN ('double_payment', 'amount_mismatch', 'currency_mismatch', 'not_found')),
    'payment_callback:double_payment:double_payment:true payment_callback:amount_mismatch:amount_mismatch:true '
    'payment_callback:currency_mismatch:currency_mismatch:true payment_callback:not_found:unknown_order:true');
SELECT t_eq('payment_exception context: the payment', (SELECT (context -> 'X1') - 'exception_id'::text FROM hc.calls
    WHERE fn = 'three' AND context -> 'X1' ->> 'txn_no' = 'T-X1c'),
    '{"txn_no": "T-X1c", "amount_cents": 500, "currency": "EUR", "channel": "card", "outcome": "currency_mismatch",
      "operator": null, "reason": null, "charge_ref": null, "shop": null, "kind": "currency_mismatch",
      "resolution": "manual_review", "order_status": "pending_payment"}'::jsonb);
SELECT t_eq('unknown order: keyed by the number given, no shop', (SELECT context -> 'NOPE' -> 'shop' FROM hc.calls
    WHERE fn = 'three' AND order_nos = '{NOPE}'), 'null'::jsonb);
SELECT t_eq('no hook for the duplicate', (SELECT count(*) FROM hc.calls WHERE fn = 'three' AND context -> 'P1' ->> 'txn_no' = 'T-P1'), 1::bigint);

------------------------------------------------------------------------------------------------
-- refund_result: a refund that succeeded, one that failed; a duplicate report runs no hook.
SET ROLE ordergate_service;
SELECT t_eq('refund succeeded', (SELECT result FROM ordergate.record_refund('T-M1', 'RF-1', 'succeeded')), 'refunded');
SELECT t_eq('refund failed', (SELECT result FROM ordergate.record_refund('T-P1b', 'RF-2', 'failed')), 'manual_review');
SELECT t_eq('refund duplicate', (SELECT result FROM ordergate.record_refund('T-M1', 'RF-1', 'succeeded')), 'duplicate');
RESET ROLE;
SELECT t_eq('refund_result hooks',
    (SELECT string_agg(order_nos::text || ':' || source || ':' || (context -> order_nos[1] ->> 'refund_ref') || ':'
                       || (context -> order_nos[1] ->> 'outcome') || ':' || (context -> order_nos[1] ->> 'result') || ':'
                       || (context -> order_nos[1] ->> 'kind') || ':' || (context -> order_nos[1] ->> 'amount_cents'), ' ' ORDER BY seq)
       FROM hc.calls WHERE fn = 'three' AND source = 'refund_result'),
    '{M1}:refund_result:RF-1:succeeded:refunded:late_payment:300 {P1}:refund_result:RF-2:failed:manual_review:double_payment:500');

------------------------------------------------------------------------------------------------
-- A registered three-argument hook turned hostile is refused at the claim, nothing claimed; an
-- overload with a defaulted parameter added later is never the one called.
SET ROLE hc_shop;
CREATE OR REPLACE FUNCTION hc.three(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'GRANT UPDATE ON ordergate.orders TO hc_shop';
END $$;
RESET ROLE;
SET ROLE ordergate_service;
SELECT ordergate.place_order('H1', 100, '[]', NULL, now() - interval '1 minute');
SELECT t_eq('3-arg swapped to SECURITY INVOKER: refused', pg_temp.claim_error(ARRAY['H1']),
    '42501|hooks|hook hc.three(text[],text,jsonb): refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
RESET ROLE;
SELECT t_eq('swap: H1 still pending, no grant', (SELECT status FROM ordergate.orders WHERE order_no = 'H1')
    || has_table_privilege('hc_shop', 'ordergate.orders', 'UPDATE')::text, 'pending_paymentfalse');
SET ROLE hc_shop;
CREATE OR REPLACE FUNCTION hc.three(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, context) VALUES ('three', order_nos, source, context);
$$;
CREATE FUNCTION hc.three(order_nos text[], source text, context jsonb, version int DEFAULT 2) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hc, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, context) VALUES ('overload', order_nos, source, context);
$$;
RESET ROLE;
-- Restored exactly (the fingerprint is the registered one again): no need to register again.
SET ROLE ordergate_admin;
SELECT t_eq('restored exactly: unchanged', ordergate.add_hook('cancelled', 'hc.three(text[],text,jsonb)'), 'exists');
RESET ROLE;
SELECT t_error('a call by name is now ambiguous', $$SELECT hc.three('{X}'::text[], 'x'::text, '{}'::jsonb)$$, '42725');
SET ROLE ordergate_service;
SELECT t_eq('overload: claim still works', pg_temp.claim_error(ARRAY['H1']), 'no error');
RESET ROLE;
SELECT t_eq('overload: the registered function ran', (SELECT string_agg(fn, ',') FROM hc.calls WHERE order_nos = '{H1}' AND fn <> 'two'), 'three');
-- Dropped with CASCADE: the wrapper and the operator go; the claim fails with 42883 until
-- drop_hook(id).
SELECT t_error('a registered 3-arg hook is not dropped without CASCADE', $$DROP FUNCTION hc.three(text[], text, jsonb)$$, '2BP01');
DROP FUNCTION hc.three(text[], text, jsonb) CASCADE;
SET ROLE ordergate_service;
SELECT ordergate.place_order('H2', 100, '[]', NULL, now() - interval '1 minute');
SELECT t_eq('dropped 3-arg hook fails the claim', pg_temp.claim_error(ARRAY['H2']),
    '42883|hooks|hook hc.three(text[],text,jsonb): the function registered for event cancelled no longer exists');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('drop them by id', (SELECT string_agg(ordergate.drop_hook(id), ',') FROM ordergate.hooks WHERE nargs = 3),
    'dropped,dropped,dropped,dropped,dropped,dropped,dropped,dropped');
SELECT t_eq('drop the 2-arg one', ordergate.drop_hook('cancelled', 'hc.two(text[],text)'), 'dropped');
RESET ROLE;
SELECT t_eq('no registration, operator or wrapper left',
    (SELECT count(*) FROM ordergate.hooks) + (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'ordergate_hooks'::regnamespace)
    + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'ordergate_hooks'::regnamespace), 0::bigint);
SET ROLE ordergate_service;
SELECT t_eq('claims work without hooks', pg_temp.claim_error(ARRAY['H2']), 'no error');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- add_check / drop_check: refusals register nothing.
SET ROLE ordergate_admin;
SELECT t_eq('check: bad name', split_part(pg_temp.check_error('Stock!', 'hc.check_stock()'), '|', 1), '22023');
SELECT t_eq('check: NULL function', split_part(pg_temp.check_error('stock', NULL), '|', 1), '22023');
SELECT t_eq('check: SECURITY INVOKER refused', pg_temp.check_error('stock', 'hc.check_invoker()'),
    '22023|add_check: hc.check_invoker() refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
SELECT t_eq('check: no search_path refused', split_part(pg_temp.check_error('stock', 'hc.check_no_path()'), '|', 1), '22023');
SELECT t_eq('check: superuser owner refused', pg_temp.check_error('stock', 'hc.check_super()'),
    format('22023|add_check: hc.check_super() refused: it is owned by %s, a superuser', session_user));
SELECT t_eq('check: rows of int refused', pg_temp.check_error('stock', 'hc.check_int()'),
    '22023|add_check: hc.check_int() refused: it must be a function () RETURNS TABLE(detail text)');
SELECT t_eq('check: an argument refused', split_part(pg_temp.check_error('stock', 'hc.check_arg(integer)'), '|', 1), '22023');
SELECT t_eq('check: a hook is not a check', split_part(pg_temp.check_error('stock', 'hc.two(text[],text)'), '|', 1), '22023');
SELECT t_eq('check: not executable by ordergate_owner', split_part(pg_temp.check_error('stock', 'hc.check_private()'), '|', 1), '42501');
SELECT t_eq('check refusals register nothing',
    (SELECT count(*) FROM ordergate.checks) + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'ordergate_hooks'::regnamespace), 0::bigint);
SELECT t_eq('add check stock', ordergate.add_check('stock', 'hc.check_stock()') > 0, true);
SELECT t_eq('check: a function that does not exist', split_part(pg_temp.check_error('gone', '999999999'), '|', 2),
    'add_check: no function with oid 999999999');
SELECT t_eq('add check stock again: same id', ordergate.add_check('stock', 'hc.check_stock()'), (SELECT id FROM ordergate.checks WHERE name = 'stock'));
SELECT t_eq('check name taken by another function', split_part(pg_temp.check_error('stock', 'hc.check_raises()'), '|', 1), '22023');
SELECT t_eq('add check raises', ordergate.add_check('books', 'hc.check_raises()') > 0, true);
-- At most 64 checks (what the scanner reports): a 65th is refused, nothing registered.
SELECT t_eq('62 more checks', (SELECT count(ordergate.add_check('more_' || i, 'hc.check_stock()')) FROM generate_series(1, 62) i), 62::bigint);
SELECT t_eq('a 65th is refused', pg_temp.check_error('one_too_many', 'hc.check_stock()'),
    '22023|add_check: 64 checks are registered already, the most reconcile reports');
SELECT t_eq('re-adding a registered one still works at 64', ordergate.add_check('more_1', 'hc.check_stock()') > 0, true);
SELECT t_eq('drop the 62', (SELECT count(*) FILTER (WHERE ordergate.drop_check('more_' || i) = 'dropped') FROM generate_series(1, 62) i), 62::bigint);
RESET ROLE;

-- reconcile(): the built-in invariants first, then shop:<name> in registration order.
CREATE FUNCTION pg_temp.shop_rows() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(coalesce(invariant::text, '-') || ' ' || name || ' ' || violations || ' '
                      || coalesce(array_to_string(sample, ';'), ''), ' | ' ORDER BY ord)
      FROM ordergate.reconcile() WITH ORDINALITY AS r(invariant, name, violations, sample, ord)
     WHERE name LIKE 'shop:%'
$$;
SELECT t_eq('shop checks come after every built-in invariant',
    (SELECT bool_and(ord > (SELECT max(o2) FROM ordergate.reconcile() WITH ORDINALITY AS b(i, n, v, s, o2) WHERE i IS NOT NULL))
       FROM ordergate.reconcile() WITH ORDINALITY AS r(invariant, name, violations, sample, ord) WHERE invariant IS NULL), true);
SELECT t_eq('the built-in invariants hold', (SELECT sum(violations) FROM ordergate.reconcile() WHERE invariant IS NOT NULL), 0::numeric);
-- The shop's stock says 10; ordergate's is 9 (C1 was given back: 10 again). Plant a difference.
UPDATE hc.stock SET qty = 7 WHERE sku = 'K1';
SELECT t_eq('a violating check is counted, a raising one failed', pg_temp.shop_rows(),
    '- shop:stock 1 sku K1: shop 7, ordergate 10 | - shop:books -1 failed: P0001 the shop''s books are unreadable');
UPDATE hc.stock SET qty = 10 WHERE sku = 'K1';
SELECT t_eq('a clean check reports 0', (SELECT violations FROM ordergate.reconcile() WHERE name = 'shop:stock'), 0::bigint);
SET ROLE ordergate_trigger;
SELECT t_eq('the scanner''s role runs the checks', (SELECT string_agg(name || '=' || violations, ',') FROM ordergate.reconcile() WHERE invariant IS NULL),
    'shop:stock=0,shop:books=-1');
RESET ROLE;

-- A check changed since registration, or made hostile, is failed, not run; registered again it runs.
SET ROLE hc_shop;
CREATE OR REPLACE FUNCTION hc.check_stock() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SET search_path = hc, pg_temp AS $$ SELECT 'never' $$;
RESET ROLE;
SELECT t_eq('a check swapped to SECURITY INVOKER is failed', (SELECT violations || ' ' || sample[1] FROM ordergate.reconcile() WHERE name = 'shop:stock'),
    '-1 failed: hc.check_stock() refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
SET ROLE hc_shop;
CREATE OR REPLACE FUNCTION hc.check_stock() RETURNS TABLE (detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = hc, pg_temp AS $$ SELECT 'changed' $$;
RESET ROLE;
SELECT t_eq('a changed check is failed', (SELECT violations || ' ' || split_part(sample[1], ';', 1) FROM ordergate.reconcile() WHERE name = 'shop:stock'),
    '-1 failed: hc.check_stock() changed since it was registered');
SET ROLE ordergate_admin;
SELECT t_eq('registered again', ordergate.add_check('stock', 'hc.check_stock()'), (SELECT id FROM ordergate.checks WHERE name = 'stock'));
RESET ROLE;
SELECT t_eq('registered again: runs', (SELECT violations || ' ' || sample[1] FROM ordergate.reconcile() WHERE name = 'shop:stock'), '1 changed');
-- Dropped with CASCADE: reported failed until drop_check.
SELECT t_error('a registered check is not dropped without CASCADE', $$DROP FUNCTION hc.check_raises()$$, '2BP01');
DROP FUNCTION hc.check_raises() CASCADE;
SELECT t_eq('a dropped check is failed', (SELECT violations || ' ' || sample[1] FROM ordergate.reconcile() WHERE name = 'shop:books'),
    '-1 failed: the function hc.check_raises() no longer exists (drop_check(''books''))');
SET ROLE ordergate_admin;
SELECT t_eq('drop_check books', ordergate.drop_check('books'), 'dropped');
SELECT t_eq('drop_check again', ordergate.drop_check('books'), 'not_found');
SELECT t_error('drop_check bad name', $$SELECT ordergate.drop_check('')$$, '22023');
SELECT t_eq('drop_check stock', ordergate.drop_check('stock'), 'dropped');
RESET ROLE;
SELECT t_eq('no check, no wrapper left',
    (SELECT count(*) FROM ordergate.checks) + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'ordergate_hooks'::regnamespace), 0::bigint);
SELECT t_eq('reconcile: built-in rows only', (SELECT count(*) FROM ordergate.reconcile() WHERE invariant IS NULL), 0::bigint);
SELECT t_eq('reconcile clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
DROP SCHEMA hc CASCADE;
REVOKE SELECT ON ordergate.inventory FROM hc_shop;
REVOKE USAGE ON SCHEMA ordergate FROM hc_shop;
