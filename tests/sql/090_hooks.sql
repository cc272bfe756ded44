-- Effect hooks that cannot take over the gate (docs/integrate.md, "Hooks"): add_hook accepts only
-- a SECURITY DEFINER function owned by a shop role (no superuser, no ordergate role, no member of
-- ordergate_owner) that pins its own search_path; every claim checks it again and refuses a
-- function changed since it was registered; the registered function is called by OID, whatever
-- overloads appear; a hook cut off by statement_timeout fails its claim with the hook marker.
-- Every refusal changes nothing: the books and the grants are checked, not only the error.

SELECT og_reset();
SELECT ordergate.add_stock('K1', 10);

DROP SCHEMA IF EXISTS hk CASCADE;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hk_shop') THEN CREATE ROLE hk_shop NOLOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hk_insider') THEN CREATE ROLE hk_insider NOLOGIN; END IF;
END $$;
GRANT ordergate_owner TO hk_insider;       -- a role that may act as the owner
CREATE SCHEMA hk AUTHORIZATION hk_shop;
GRANT USAGE ON SCHEMA hk TO ordergate_owner, ordergate_admin, ordergate_service;
SET ROLE hk_shop;
CREATE TABLE hk.calls (seq bigserial, fn text, order_nos text[], source text, run_as text);
-- The shop's own stock table, named like ordergate's.
CREATE TABLE hk.inventory (sku text PRIMARY KEY, available bigint NOT NULL);
INSERT INTO hk.inventory VALUES ('K1', 0);
GRANT SELECT ON ALL TABLES IN SCHEMA hk TO ordergate_service;
-- The recommended form.
CREATE FUNCTION hk.good(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, run_as) VALUES ('good', order_nos, source, current_user);
$$;
CREATE FUNCTION hk.invoker(order_nos text[], source text) RETURNS void
LANGUAGE sql SET search_path = hk, pg_temp AS $$ SELECT $$;
-- SECURITY DEFINER but no search_path of its own: it would see ordergate's tables first.
CREATE FUNCTION hk.no_path(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER AS $$ SELECT $$;
CREATE FUNCTION hk.restock(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$
    UPDATE inventory SET available = available + 1 WHERE sku = 'K1';
$$;
CREATE FUNCTION hk.slow(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$
    SELECT pg_sleep(CASE WHEN 'SLOW' = ANY (order_nos) THEN 5 ELSE 0 END);
    INSERT INTO calls (fn, order_nos, source, run_as) VALUES ('slow', order_nos, source, current_user);
$$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA hk FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hk TO ordergate_owner;
RESET ROLE;
-- Owned by a superuser (created as one), by ordergate_owner, by a member of ordergate_owner.
CREATE FUNCTION hk.by_superuser(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$ SELECT $$;
CREATE FUNCTION hk.by_owner(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$ SELECT $$;
ALTER FUNCTION hk.by_owner(text[], text) OWNER TO ordergate_owner;
CREATE FUNCTION hk.by_insider(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$ SELECT $$;
ALTER FUNCTION hk.by_insider(text[], text) OWNER TO hk_insider;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hk TO ordergate_owner;

CREATE FUNCTION pg_temp.claim_error(p_nos text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text; v_table text;
BEGIN
    PERFORM ordergate.claim_cancel(p_nos, 'timeout_consumer');
    RETURN 'no error';
EXCEPTION WHEN OTHERS OR query_canceled THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_table = TABLE_NAME;
    RETURN v_state || '|' || v_table || '|' || v_msg;
END $$;
CREATE FUNCTION pg_temp.add_error(p_fn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_state text; v_msg text;
BEGIN
    RETURN ordergate.add_hook('cancelled', p_fn::regprocedure);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
    RETURN v_state || '|' || v_msg;
END $$;

------------------------------------------------------------------------------------------------
-- Registration refuses what would run with ordergate's rights, and registers nothing.
SET ROLE ordergate_admin;
SELECT t_eq('SECURITY INVOKER refused', pg_temp.add_error('hk.invoker(text[],text)'),
    '22023|add_hook: hk.invoker(text[],text) refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
SELECT t_eq('superuser owner refused', pg_temp.add_error('hk.by_superuser(text[],text)'),
    format('22023|add_hook: hk.by_superuser(text[],text) refused: it is owned by %s, a superuser', session_user));
SELECT t_eq('ordergate_owner refused', pg_temp.add_error('hk.by_owner(text[],text)'),
    '22023|add_hook: hk.by_owner(text[],text) refused: it is owned by ordergate_owner, an ordergate role');
SELECT t_eq('member of ordergate_owner refused', pg_temp.add_error('hk.by_insider(text[],text)'),
    '22023|add_hook: hk.by_insider(text[],text) refused: its owner hk_insider is a member of ordergate_owner');
SELECT t_eq('no search_path refused', pg_temp.add_error('hk.no_path(text[],text)'),
    '22023|add_hook: hk.no_path(text[],text) refused: it does not pin its own search_path (SET search_path = ...), so it would use ordergate''s');
SELECT t_eq('refusals register nothing', (SELECT count(*) FROM ordergate.hooks), 0::bigint);
SELECT t_eq('refusals create no operator',
    (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'ordergate_hooks'::regnamespace), 0::bigint);
SELECT t_eq('add good', ordergate.add_hook('cancelled', 'hk.good(text[],text)'), 'added');
SELECT t_eq('add good again', ordergate.add_hook('cancelled', 'hk.good(text[],text)'), 'exists');
RESET ROLE;
SELECT t_eq('one operator bound to the function',
    (SELECT string_agg(o.oprcode::regprocedure::text, ',') FROM pg_operator o
      WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace AND o.oprname = (SELECT opname FROM ordergate.hooks)),
    'hk.good(text[],text)');
SELECT t_eq('operator owned by ordergate_owner',
    (SELECT string_agg(o.oprowner::regrole::text, ',') FROM pg_operator o
      WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace), 'ordergate_owner');

SET ROLE ordergate_service;
SELECT ordergate.place_order(x, 100, '[{"sku":"K1","qty":1}]', NULL, now() - interval '1 minute')
  FROM unnest(ARRAY['A1', 'A2', 'A3', 'A4', 'A5', 'A6', 'A7', 'SLOW']) x;
SELECT ordergate.place_order('PD', 100, '[{"sku":"K1","qty":1}]', NULL, now() + interval '1 hour');
SELECT t_eq('pay PD', (SELECT outcome FROM ordergate.claim_payment('PD', 'T-PD', 100, 'card')), 'paid');
SELECT t_eq('good hook runs as the shop', pg_temp.claim_error(ARRAY['A1']), 'no error');
RESET ROLE;
SELECT t_eq('good hook called as its owner', (SELECT string_agg(fn || ':' || order_nos::text || ':' || run_as, ' ') FROM hk.calls),
    'good:{A1}:hk_shop');

------------------------------------------------------------------------------------------------
-- The owner of a registered hook replaces it with a SECURITY INVOKER body that would act as
-- ordergate_owner: grant the shop rights on the gate's tables, set a paid order back to pending
-- and delete its log row. The next claim refuses it before it runs: nothing claimed, no grant.
SET ROLE hk_shop;
CREATE OR REPLACE FUNCTION hk.good(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'GRANT UPDATE, DELETE ON ordergate.orders, ordergate.status_log TO hk_shop';
    ALTER TABLE ordergate.orders DISABLE TRIGGER USER;
    UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'PD';
    DELETE FROM ordergate.status_log WHERE order_no = 'PD';
END $$;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('swapped to SECURITY INVOKER: refused', pg_temp.claim_error(ARRAY['A2']),
    '42501|hooks|hook hk.good(text[],text): refused: it is not SECURITY DEFINER, so it would run as ordergate_owner');
RESET ROLE;
SELECT t_eq('swap: A2 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'A2'), 'pending_payment');
SELECT t_eq('swap: no log row for A2', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'A2'), 0::bigint);
SELECT t_eq('swap: PD still paid', (SELECT status FROM ordergate.orders WHERE order_no = 'PD'), 'paid');
SELECT t_eq('swap: PD log row kept', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'PD'), 1::bigint);
SELECT t_eq('swap: no grant made', has_table_privilege('hk_shop', 'ordergate.orders', 'UPDATE')
                                 OR has_table_privilege('hk_shop', 'ordergate.status_log', 'DELETE'), false);
SELECT t_eq('swap: triggers still enabled',
    (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ordergate.orders'::regclass AND NOT tgisinternal AND tgenabled = 'D'), 0::bigint);
-- Registering it again checks it again: still refused, the registration is not changed.
SET ROLE ordergate_admin;
SELECT t_eq('swapped hook not re-registered', split_part(pg_temp.add_error('hk.good(text[],text)'), '|', 1), '22023');
RESET ROLE;

-- A SECURITY DEFINER hook whose body changed (same owner, same settings): refused until
-- registered again, then run; re-registering an unchanged one is a no-op.
SET ROLE hk_shop;
CREATE OR REPLACE FUNCTION hk.good(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, run_as) VALUES ('good v2', order_nos, source, current_user);
$$;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('changed body refused', pg_temp.claim_error(ARRAY['A2']),
    '42501|hooks|hook hk.good(text[],text): changed since it was registered (body, owner, settings or security); refused until registered again');
SELECT t_eq('changed body: A2 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'A2'), 'pending_payment');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('re-register a changed hook', ordergate.add_hook('cancelled', 'hk.good(text[],text)'), 'updated');
SELECT t_eq('re-register unchanged', ordergate.add_hook('cancelled', 'hk.good(text[],text)'), 'exists');
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('re-registered hook runs', pg_temp.claim_error(ARRAY['A2']), 'no error');
RESET ROLE;
SELECT t_eq('the new body ran', (SELECT fn FROM hk.calls WHERE order_nos = '{A2}'), 'good v2');

-- Altered without a new body: its owner, its security, its search_path.
ALTER FUNCTION hk.good(text[], text) OWNER TO hk_insider;
SET ROLE ordergate_service;
SELECT t_eq('owner changed to a member of ordergate_owner: refused', pg_temp.claim_error(ARRAY['A3']),
    '42501|hooks|hook hk.good(text[],text): refused: its owner hk_insider is a member of ordergate_owner');
RESET ROLE;
ALTER FUNCTION hk.good(text[], text) OWNER TO hk_shop;
SET ROLE hk_shop;
ALTER FUNCTION hk.good(text[], text) RESET search_path;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('search_path reset: refused', pg_temp.claim_error(ARRAY['A3']),
    '42501|hooks|hook hk.good(text[],text): refused: it does not pin its own search_path (SET search_path = ...), so it would use ordergate''s');
RESET ROLE;
SET ROLE hk_shop;
ALTER FUNCTION hk.good(text[], text) SET search_path = hk, pg_temp;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('restored exactly: runs again', pg_temp.claim_error(ARRAY['A3']), 'no error');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- An overload with a defaulted parameter ("v2") added after registration: a call by name would
-- be ambiguous (42725); the claims still call the registered function.
SET ROLE hk_shop;
CREATE FUNCTION hk.good(order_nos text[], source text, version int DEFAULT 2) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = hk, pg_temp AS $$
    INSERT INTO calls (fn, order_nos, source, run_as) VALUES ('overload', order_nos, source, current_user);
$$;
RESET ROLE;
SELECT t_error('a call by name is now ambiguous', $$SELECT hk.good('{X}'::text[], 'x'::text)$$, '42725');
SET ROLE ordergate_service;
SELECT t_eq('overload: claim still works', pg_temp.claim_error(ARRAY['A4']), 'no error');
SELECT t_eq('overload: close_order still works', (SELECT outcome FROM ordergate.close_order('A5', 'ops', 'asked')), 'cancelled');
RESET ROLE;
SELECT t_eq('overload: the registered function ran', (SELECT string_agg(fn, ',' ORDER BY seq) FROM hk.calls WHERE order_nos && '{A4,A5}'),
    'good v2,good v2');

------------------------------------------------------------------------------------------------
-- The search_path finding: an unqualified "UPDATE inventory" in a hook must reach the shop's
-- table, never ordergate.inventory. Without a pinned search_path it is refused at registration
-- (above) and, pinned and then reset, at the claim: ordergate's stock stays exact.
SET ROLE ordergate_admin;
SELECT t_eq('add restock', ordergate.add_hook('cancelled', 'hk.restock(text[],text)'), 'added');
RESET ROLE;
SET ROLE hk_shop;
ALTER FUNCTION hk.restock(text[], text) RESET search_path;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('unpinned restock refused', split_part(pg_temp.claim_error(ARRAY['A6']), '|', 1), '42501');
RESET ROLE;
SELECT t_eq('ordergate stock exact', (SELECT available || '/' || total FROM ordergate.inventory WHERE sku = 'K1'), '6/10');
SELECT t_eq('A6 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'A6'), 'pending_payment');
SET ROLE hk_shop;
ALTER FUNCTION hk.restock(text[], text) SET search_path = hk, pg_temp;
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('pinned restock runs', pg_temp.claim_error(ARRAY['A6']), 'no error');
RESET ROLE;
SELECT t_eq('restock wrote the shop table', (SELECT available FROM hk.inventory WHERE sku = 'K1'), 1::bigint);
SELECT t_eq('ordergate stock given back once', (SELECT available || '/' || total FROM ordergate.inventory WHERE sku = 'K1'), '7/10');
SELECT t_eq('reconcile clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SET ROLE ordergate_admin;
SELECT t_eq('drop restock', ordergate.drop_hook('cancelled', 'hk.restock(text[],text)'), 'dropped');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- Replaced between the check and the call (here by itself, as its owner, while it runs): the
-- claim is refused after the call and everything is undone, the replacement included.
SET ROLE hk_shop;
CREATE FUNCTION hk.selfmod(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = hk, pg_temp AS $f$
BEGIN
    INSERT INTO calls (fn, order_nos, source, run_as) VALUES ('selfmod', order_nos, source, current_user);
    EXECUTE 'CREATE OR REPLACE FUNCTION hk.selfmod(order_nos text[], source text) RETURNS void '
            'LANGUAGE sql AS $b$ SELECT $b$';
END $f$;
REVOKE EXECUTE ON FUNCTION hk.selfmod(text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION hk.selfmod(text[], text) TO ordergate_owner;
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('add selfmod', ordergate.add_hook('cancelled', 'hk.selfmod(text[],text)'), 'added');
RESET ROLE;
SET ROLE ordergate_service;
SELECT t_eq('changed while it ran: refused', pg_temp.claim_error(ARRAY['A7']),
    '42501|hooks|hook hk.selfmod(text[],text): changed while it ran; refused until registered again');
RESET ROLE;
SELECT t_eq('changed while it ran: A7 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'A7'), 'pending_payment');
SELECT t_eq('changed while it ran: its writes undone', (SELECT count(*) FROM hk.calls WHERE fn = 'selfmod'), 0::bigint);
SELECT t_eq('changed while it ran: the replacement undone', (SELECT prosecdef FROM pg_proc WHERE oid = 'hk.selfmod(text[],text)'::regprocedure), true);
SET ROLE ordergate_admin;
SELECT t_eq('drop selfmod', ordergate.drop_hook('cancelled', 'hk.selfmod(text[],text)'), 'dropped');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- A hook cut off by statement_timeout (query_canceled, which WHEN OTHERS does not catch) fails
-- its claim with the hook marker and SQLSTATE 57014, so the clients set the order apart.
SET ROLE ordergate_admin;
SELECT t_eq('add slow', ordergate.add_hook('cancelled', 'hk.slow(text[],text)'), 'added');
RESET ROLE;
SET statement_timeout = '300ms';
SET ROLE ordergate_service;
SELECT t_eq('timeout in a hook carries the marker', pg_temp.claim_error(ARRAY['SLOW']),
    '57014|hooks|hook hk.slow(text[],text): canceling statement due to statement timeout');
RESET ROLE;
RESET statement_timeout;
SELECT t_eq('timed out: SLOW still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'SLOW'), 'pending_payment');
SELECT t_eq('timed out: no log row', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'SLOW'), 0::bigint);
SET ROLE ordergate_service;
SELECT t_eq('a fast order with the slow hook', pg_temp.claim_error(ARRAY['A7']), 'no error');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- A registration's operator goes with drop_hook; a function dropped with CASCADE takes its
-- operator and leaves the registration failing with 42883 until drop_hook(id).
SET ROLE ordergate_service;
SELECT ordergate.place_order('TM', 100, '[]', NULL, now() - interval '1 minute');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('drop slow', ordergate.drop_hook('cancelled', 'hk.slow(text[],text)'), 'dropped');
RESET ROLE;
SELECT t_eq('its operator is gone',
    (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'ordergate_hooks'::regnamespace), 1::bigint);
SELECT t_error('a registered hook is not dropped without CASCADE', $$DROP FUNCTION hk.good(text[], text)$$, '2BP01');
DROP FUNCTION hk.good(text[], text) CASCADE;
SET ROLE ordergate_service;
SELECT t_eq('dropped hook fails the claim', pg_temp.claim_error(ARRAY['TM']),
    '42883|hooks|hook hk.good(text[],text): the function registered for event cancelled no longer exists');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('drop it by id', ordergate.drop_hook((SELECT id FROM ordergate.hooks WHERE fn_name = 'hk.good(text[],text)')), 'dropped');
RESET ROLE;
SELECT t_eq('no registration, no operator left',
    (SELECT count(*) FROM ordergate.hooks) + (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'ordergate_hooks'::regnamespace),
    0::bigint);
SET ROLE ordergate_service;
SELECT t_eq('claims work without hooks', pg_temp.claim_error(ARRAY['TM']), 'no error');
RESET ROLE;
SELECT t_eq('reconcile clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
DROP SCHEMA hk CASCADE;
