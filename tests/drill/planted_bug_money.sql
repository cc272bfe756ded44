-- A deliberately broken cancel, for the drill's own test only: the cancel claim forgets the
-- captured parts of the orders it cancels (step 3 of _cancel_orders_claim never runs), so the
-- money a customer paid in parts before the deadline is kept by a cancelled order with no
-- cancelled_part exception and no refund asked. The drill must notice (its ledger: captured
-- money neither kept by a paid order nor refunded; reconcile's invariant 12) and exit non-zero.
BEGIN;
-- The function's live definition with its parts step turned off (the condition that guards it
-- made false), installed under the same name, so everything else stays the real code.
DO $plant$
DECLARE
    v_src text := pg_get_functiondef(
        'ordergate._cancel_orders_claim(text[], text, text, text, boolean)'::regprocedure);
BEGIN
    IF position('IF v_parts IS NOT NULL THEN' IN v_src) = 0 THEN
        RAISE EXCEPTION 'planted_bug_money.sql: the parts step of _cancel_orders_claim is not where it was';
    END IF;
    EXECUTE replace(v_src, 'IF v_parts IS NOT NULL THEN', 'IF false AND v_parts IS NOT NULL THEN');
END
$plant$;
COMMIT;
