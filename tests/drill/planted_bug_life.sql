-- A deliberately broken release, for the drill's own test only: release_order gives the order's
-- stock back as a cancel would, although a released order keeps its goods reserved like a paid
-- one (they go out on delivery). The drill must notice (its ledger: the shelf holds more than
-- the orders not cancelled leave; reconcile's invariant 2) and exit non-zero.
BEGIN;
-- The function's live definition with the restock added before its coupon step, installed under
-- the same name, so everything else stays the real code.
DO $plant$
DECLARE
    v_src text := pg_get_functiondef('ordergate.release_order(text, text, text)'::regprocedure);
    v_at  text := 'IF v_coupon IS NOT NULL THEN';
BEGIN
    IF position(v_at IN v_src) = 0 THEN
        RAISE EXCEPTION 'planted_bug_life.sql: the coupon step of release_order is not where it was';
    END IF;
    EXECUTE replace(v_src, v_at,
                    'UPDATE inventory i SET available = i.available + it.qty'
                    || ' FROM order_items it WHERE it.order_no = p_order_no AND i.sku = it.sku; '
                    || v_at);
END
$plant$;
COMMIT;
