-- _cancel_orders: cancels the pending candidates among p_nos, for claim_cancel and close_order.
-- Its steps, in call order (each step's name starts with this function's):
--   1. _cancel_orders_claim: the claim and ordergate's own side effects but the stock;
--   2. _hooks_run: the shop's hooks for 'cancelled', with exactly the orders won (and, when a
--      three-argument hook is registered for it, their context: actor, operator and reason of
--      a manual close, captured_cents and currency of the parts captured before the cancel);
--   3. _cancel_orders_restock: the stock given back.
-- Returns the order numbers won (NULL if none).
--
-- Order of locks: the orders (order_no order) and their coupons are held when the hooks start;
-- a hook then locks the shop's rows (docs/integrate.md, "Lock order"); the inventory rows come
-- last, after the hooks, so a slow hook never holds a hot SKU row that every place_order of
-- that SKU needs. A hook that raises aborts the claim. The hooks run here, outside steps 1 and
-- 3, so that the planner settings pinned there never reach the shop's code.
CREATE OR REPLACE FUNCTION ordergate._cancel_orders(p_nos text[], p_source text, p_actor text,
                                                    p_note text, p_due_only boolean DEFAULT false)
RETURNS text[]
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    c       record;
    v_ctx   jsonb;
    v_hooks smallint;  -- the most arguments a 'cancelled' hook takes; NULL: no hook
BEGIN
    SELECT * INTO c FROM _cancel_orders_claim(p_nos, p_source, p_actor, p_note, p_due_only);
    IF c.o_won IS NULL THEN
        RETURN NULL;
    END IF;
    -- One look at the event's hooks: none, and _hooks_run is not called; the context (which
    -- reads the winners again) only for a three-argument hook.
    SELECT max(k.nargs) INTO v_hooks FROM hooks k WHERE k.event = 'cancelled';
    IF v_hooks = 3 THEN
        SELECT jsonb_object_agg(o.order_no, jsonb_build_object(
                   'actor', p_actor,
                   'operator', CASE WHEN p_source = 'manual' THEN p_actor END,
                   'reason', p_note,
                   'captured_cents', o.captured_cents,
                   'currency', o.currency))
          INTO v_ctx
          FROM orders o
         WHERE o.order_no = ANY (c.o_won);
    END IF;
    IF v_hooks IS NOT NULL THEN
        PERFORM _hooks_run('cancelled', c.o_won, p_source, v_ctx);
    END IF;
    PERFORM _cancel_orders_restock(c.o_skus, c.o_qtys);
    RETURN c.o_won;
END
$$;
COMMENT ON FUNCTION ordergate._cancel_orders(text[],text,text,text,boolean) IS
    'Internal: a cancel, in call order: _cancel_orders_claim, the hooks, _cancel_orders_restock';
