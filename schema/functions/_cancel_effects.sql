-- _cancel_effects: a cancel claim (_cancel_claim: the claim and ordergate's own side effects),
-- then the shop's hooks for 'cancelled' with exactly its winners; shared by claim_cancel and
-- close_order. Returns the order numbers won (NULL if none).
--
-- The hooks run last, with every lock ordergate takes already held: a hook then locks the shop's
-- rows (docs/integrate.md, "Lock order"). A hook that raises aborts the claim. They run here,
-- outside _cancel_claim, so that the planner settings pinned there never reach the shop's code.
CREATE OR REPLACE FUNCTION ordergate._cancel_effects(p_nos text[], p_source text, p_actor text,
                                                     p_note text, p_due_only boolean DEFAULT false)
RETURNS text[]
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_won text[];
BEGIN
    v_won := _cancel_claim(p_nos, p_source, p_actor, p_note, p_due_only);
    IF v_won IS NOT NULL THEN
        PERFORM _hooks_run('cancelled', v_won, p_source);
    END IF;
    RETURN v_won;
END
$$;
