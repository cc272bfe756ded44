-- A shop's hooks for the tests of hook failures (consumer and scanner): each records the orders
-- it is called with in shop_t.seen, at most once per event and order (a second call for the same
-- order breaks the primary key, so a test sees a hook called twice), and raises for the orders
-- listed in shop_t.poison ('*': every order), as a hook with a bug or a missing shop row would,
-- and sleeps for those in shop_t.sleep.
-- A test mends the hook by deleting from shop_t.poison. Loaded by testdb_exec_file as the
-- superuser; the schema, its tables and the hooks belong to the shop's role og_test_shop (a
-- superuser's hook is refused, docs/integrate.md, "Hooks"): SECURITY DEFINER, their own
-- search_path, executable by ordergate_owner only. A test may add hooks the same way (SET ROLE
-- og_test_shop).
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'og_test_shop') THEN CREATE ROLE og_test_shop NOLOGIN; END IF;
END $$;
CREATE SCHEMA shop_t AUTHORIZATION og_test_shop;
SET ROLE og_test_shop;
CREATE TABLE shop_t.poison (order_no text PRIMARY KEY);
CREATE TABLE shop_t.seen (event text, order_no text, source text, PRIMARY KEY (event, order_no));
-- Orders the hook is slow for (a minute: longer than any statement_timeout of a test), as a hook
-- waiting for a slow shop table would be.
CREATE TABLE shop_t.sleep (order_no text PRIMARY KEY);

CREATE FUNCTION shop_t.record(p_event text, p_nos text[], p_source text) RETURNS void
LANGUAGE plpgsql SET search_path = shop_t, pg_temp AS $$
DECLARE
    v_bad text;
BEGIN
    SELECT min(n) INTO v_bad
      FROM unnest(p_nos) AS u(n)
     WHERE EXISTS (SELECT 1 FROM poison p WHERE p.order_no IN (u.n, '*'));
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'no stock row for order %', v_bad USING ERRCODE = 'P0001';
    END IF;
    IF EXISTS (SELECT 1 FROM sleep z WHERE z.order_no = ANY (p_nos)) THEN
        PERFORM pg_sleep(60);
    END IF;
    INSERT INTO seen SELECT p_event, n, p_source FROM unnest(p_nos) AS u(n);
END
$$;

CREATE FUNCTION shop_t.on_cancelled(p_nos text[], p_source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop_t, pg_temp
AS $$ SELECT shop_t.record('cancelled', p_nos, p_source) $$;

CREATE FUNCTION shop_t.on_paid(p_nos text[], p_source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop_t, pg_temp
AS $$ SELECT shop_t.record('paid', p_nos, p_source) $$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA shop_t FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shop_t.on_cancelled(text[], text), shop_t.on_paid(text[], text) TO ordergate_owner;
-- The claims run as ordergate_owner: it may reach the hooks, nothing else of the schema.
GRANT USAGE ON SCHEMA shop_t TO ordergate_owner;
RESET ROLE;

SELECT ordergate.add_hook('cancelled', 'shop_t.on_cancelled(text[],text)');
SELECT ordergate.add_hook('paid', 'shop_t.on_paid(text[],text)');
