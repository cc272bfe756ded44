-- _cancel_effects: a cancel claim (_cancel_claim: the claim and ordergate's own side effects but
-- the stock), then the shop's hooks for 'cancelled' with exactly its winners, then the stock
-- given back (_cancel_restock); shared by claim_cancel and close_order. Returns the order
-- numbers won (NULL if none).
--
-- Order of locks: the orders (order_no order) and their coupons are held when the hooks start;
-- a hook then locks the shop's rows (docs/integrate.md, "Lock order"); the inventory rows come
-- last, after the hooks, so a slow hook never holds a hot SKU row that every place_order of
-- that SKU needs. A hook that raises aborts the claim. The hooks run here, outside
-- _cancel_claim and _cancel_restock, so that the planner settings pinned there never reach the
-- shop's code.
CREATE OR REPLACE FUNCTION ordergate._cancel_effects(p_nos text[], p_source text, p_actor text,
                                                     p_note text, p_due_only boolean DEFAULT false)
RETURNS text[]
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM _cancel_claim(p_nos, p_source, p_actor, p_note, p_due_only);
    IF c.o_won IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM _hooks_run('cancelled', c.o_won, p_source);
    PERFORM _cancel_restock(c.o_skus, c.o_qtys);
    RETURN c.o_won;
END
$$;
