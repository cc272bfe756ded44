-- _hooks_run: calls the shop's hooks registered for p_event (add_hook), in registration order,
-- each once with p_nos (the orders this claim statement won for the event, sorted and distinct)
-- and p_source. Called by the claims after ordergate's own effects, inside their transaction, so
-- a hook's writes commit or roll back with the claim.
--
-- Runs as the claim's owner (ordergate_owner: the claims are SECURITY DEFINER); a hook that must
-- act as the shop's table owner is SECURITY DEFINER itself (docs/integrate.md, "Hooks").
-- Only registered functions run: the call names the function by its catalog name and signature,
-- and the inputs are bound parameters, never SQL text.
--
-- A hook that raises aborts the claim: the error keeps the hook's SQLSTATE, its message is
-- prefixed "hook <function>: " and carries TABLE = 'hooks' (schema ordergate), so a client can
-- tell a hook's failure from the gate's own. A registration whose function was dropped fails
-- the claim with 42883 naming it; drop_hook(id) removes it.
CREATE OR REPLACE FUNCTION ordergate._hooks_run(p_event text, p_nos text[], p_source text)
RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    h       record;
    v_nos   text[];
    v_state text;
    v_msg   text;
    v_det   text;
    v_hint  text;
BEGIN
    IF p_nos IS NULL OR cardinality(p_nos) = 0 THEN
        RETURN;
    END IF;
    FOR h IN
        SELECT k.id, p.proname, n.nspname,
               CASE WHEN p.oid IS NULL THEN k.fn_name ELSE p.oid::regprocedure::text END AS fn_name
          FROM ordergate.hooks k
          LEFT JOIN pg_catalog.pg_proc p ON p.oid = k.fn
          LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
         WHERE k.event = p_event
         ORDER BY k.id
    LOOP
        IF h.proname IS NULL THEN
            RAISE EXCEPTION 'hook %: the function registered for event % no longer exists', h.fn_name, p_event
                USING ERRCODE = '42883', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('remove the registration with SELECT ordergate.drop_hook(%s)', h.id);
        END IF;
        IF v_nos IS NULL THEN
            SELECT array_agg(DISTINCT x ORDER BY x) INTO v_nos FROM unnest(p_nos) AS u(x);
        END IF;
        BEGIN
            EXECUTE format('SELECT %I.%I($1::text[], $2::text)', h.nspname, h.proname)
              USING v_nos, p_source;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
                                    v_det = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            RAISE EXCEPTION 'hook %: %', h.fn_name, v_msg
                USING ERRCODE = v_state, TABLE = 'hooks', SCHEMA = 'ordergate',
                      DETAIL = coalesce(v_det, ''), HINT = coalesce(v_hint, '');
        END;
    END LOOP;
END
$$;
