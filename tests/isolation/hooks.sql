-- The specs again with a shop's hooks registered (run.sh with ORDERGATE_ISOLATION_HOOKS=1): every
-- interleaving must give the same output as without them, while the hooks write shop tables
-- under the lock order of docs/integrate.md ("Lock order"). Each permutation's og_reset() first
-- checks that every winner of the permutation before called its hook exactly once and nothing
-- else did; a mismatch raises, which shows in the spec's output and fails it.
BEGIN;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'og_iso_shop') THEN CREATE ROLE og_iso_shop NOLOGIN; END IF;
END $$;
GRANT ordergate_service TO og_iso_shop;   -- the hooks read ordergate's order lines
CREATE SCHEMA shop AUTHORIZATION og_iso_shop;
GRANT USAGE ON SCHEMA shop TO ordergate_owner, ordergate_admin;
SET LOCAL ROLE og_iso_shop;
-- One row per hook call and order: a second call for the same order and event is refused by the
-- key, which fails the claim and so the spec.
CREATE TABLE shop.calls (event text, order_no text, source text, PRIMARY KEY (event, order_no));
-- The shop's stock rows, written by every hook in sku order.
CREATE TABLE shop.stock (sku text PRIMARY KEY, moved bigint NOT NULL DEFAULT 0);

CREATE FUNCTION shop.record(p_event text, p_nos text[], p_source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$
    -- orders first (by order number), then stock rows (by sku)
    INSERT INTO shop.calls (event, order_no, source) SELECT p_event, x, p_source FROM unnest(p_nos) x ORDER BY x;
    INSERT INTO shop.stock AS s (sku, moved)
    SELECT it.sku, sum(it.qty) FROM ordergate.order_items it
     WHERE it.order_no = ANY (p_nos) GROUP BY it.sku ORDER BY it.sku
    ON CONFLICT (sku) DO UPDATE SET moved = s.moved + excluded.moved;
$$;
CREATE FUNCTION shop.on_cancelled(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT shop.record('cancelled', order_nos, source) $$;
CREATE FUNCTION shop.on_paid(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT shop.record('paid', order_nos, source) $$;
CREATE FUNCTION shop.on_late(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT shop.record('late_payment', order_nos, source) $$;
CREATE FUNCTION shop.on_released(order_nos text[], source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT shop.record('released', order_nos, source) $$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA shop FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shop.on_cancelled(text[],text), shop.on_paid(text[],text), shop.on_late(text[],text),
                          shop.on_released(text[],text)
    TO ordergate_owner;
RESET ROLE;

SELECT ordergate.add_hook('cancelled', 'shop.on_cancelled(text[],text)'),
       ordergate.add_hook('paid', 'shop.on_paid(text[],text)'),
       ordergate.add_hook('late_payment', 'shop.on_late(text[],text)'),
       ordergate.add_hook('released', 'shop.on_released(text[],text)');

-- What the hooks must have seen: each transition's order once, with its source; each late
-- payment's order once (archived ones included).
CREATE FUNCTION public.og_hooks_check() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_bad text;
BEGIN
    WITH want AS (
        SELECT CASE l.to_status WHEN 'paid' THEN 'paid' WHEN 'released' THEN 'released' ELSE 'cancelled' END AS event,
               l.order_no, l.source
          FROM (SELECT order_no, to_status, source FROM ordergate.status_log
                UNION ALL
                SELECT order_no, to_status, source FROM ordergate.archived_status_log) l
        UNION ALL
        SELECT DISTINCT 'late_payment', e.order_no, 'payment_callback'
          FROM (SELECT order_no, kind, txn_no FROM ordergate.exceptions
                UNION ALL
                SELECT order_no, kind, txn_no FROM ordergate.archived_exceptions) e
         WHERE e.kind = 'late_payment' AND e.txn_no IS NOT NULL
    ), diff AS (
        (SELECT * FROM want EXCEPT ALL SELECT event, order_no, source FROM shop.calls)
        UNION ALL
        (SELECT event, order_no, source FROM shop.calls EXCEPT ALL SELECT * FROM want)
    )
    SELECT string_agg(event || ':' || order_no || ':' || source, ' ' ORDER BY order_no) INTO v_bad FROM diff;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'hook calls differ from the winners: %', v_bad;
    END IF;
END
$$;

-- The permutation's reset checks the one before, then clears the shop's rows as well.
ALTER FUNCTION public.og_reset() RENAME TO og_reset_books;
CREATE FUNCTION public.og_reset() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.og_hooks_check();
    PERFORM public.og_reset_books();
    TRUNCATE shop.calls, shop.stock;
END
$$;
COMMIT;
