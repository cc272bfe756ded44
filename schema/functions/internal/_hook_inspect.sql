-- _hook_inspect: what add_hook checks before it registers a function as an effect hook, and what
-- _hooks_run checks again before every call (docs/integrate.md, "Hooks"); with p_check, what
-- add_check checks of a shop check and reconcile() again before running it (the same rules but
-- the form: fn() RETURNS TABLE(detail text) or SETOF text). present: the function
-- exists. refusal: NULL when it may be a hook, else why not (one clause, for a message that
-- names the hook). fingerprint: the facts the checks and the call depend on, to be stored at
-- registration and compared at every call.
--
-- A hook is called from the claims, which are SECURITY DEFINER and run as ordergate_owner. So
-- that it never runs with ordergate's rights whatever its owner does to it later, a hook must:
--  - be fn(order_nos text[], source text) or fn(order_nos text[], source text, context jsonb)
--    RETURNS void, a plain function outside the ordergate and system schemas;
--  - be SECURITY DEFINER: it then runs as its owner, never as the claim's role;
--  - be owned by a role that is not a superuser, not an ordergate_ role and not a member of
--    ordergate_owner (a member could act as the owner);
--  - pin its own search_path (SET search_path = ...): one inherited from the claim
--    (ordergate, pg_temp) would make its unqualified names the gate's tables.
-- The fingerprint holds the owner, SECURITY DEFINER, the settings (proconfig), the language, the
-- body (md5 of prosrc and probin) and the signature (schema, name and argument types by OID, not
-- as text, so it does not depend on the caller's search_path). A CREATE OR REPLACE, an ALTER
-- FUNCTION or an ALTER OWNER changes it. _hooks_run computes the same refusal and fingerprint
-- inline in its loop (one cached query per claim instead of a function call per hook): a change
-- here is made there too (tests/sql/090_hooks.sql fails otherwise).
CREATE OR REPLACE FUNCTION ordergate._hook_inspect(p_fn oid, p_check boolean DEFAULT false,
                                                   OUT present boolean, OUT refusal text,
                                                   OUT fingerprint text)
LANGUAGE plpgsql STABLE SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_p record;
BEGIN
    SELECT p.prokind, p.prorettype, p.proretset, p.pronargs, p.proargtypes, p.provariadic,
           p.prosecdef, p.proconfig, p.prolang, p.prosrc, p.probin, p.proname, p.pronamespace,
           p.proowner, n.nspname, r.rolname, r.rolsuper
      INTO v_p
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
      JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
     WHERE p.oid = p_fn;
    -- present, not found: an OUT parameter named found is PL/pgSQL's FOUND here, and stayed NULL.
    present := v_p.proname IS NOT NULL;
    IF NOT present THEN
        RETURN;
    END IF;
    fingerprint := md5(concat_ws('|', v_p.pronamespace, v_p.proname, v_p.proargtypes::text,
                                 v_p.prorettype, v_p.prokind, v_p.proretset, v_p.provariadic,
                                 v_p.proowner, v_p.prosecdef, coalesce(v_p.proconfig::text, '-'),
                                 v_p.prolang, md5(coalesce(v_p.prosrc, '')),
                                 md5(coalesce(v_p.probin, ''))));
    refusal := CASE
        WHEN p_check AND (v_p.prokind <> 'f' OR NOT v_p.proretset OR v_p.prorettype <> 'text'::regtype
                          OR v_p.pronargs <> 0 OR v_p.provariadic <> 0)
            THEN 'it must be a function () RETURNS TABLE(detail text)'
        WHEN NOT p_check
             AND (v_p.prokind <> 'f' OR v_p.proretset OR v_p.prorettype <> 'void'::regtype
                  OR v_p.pronargs NOT IN (2, 3) OR v_p.proargtypes[0] <> 'text[]'::regtype
                  OR v_p.proargtypes[1] <> 'text'::regtype
                  OR (v_p.pronargs = 3 AND v_p.proargtypes[2] <> 'jsonb'::regtype)
                  OR v_p.provariadic <> 0)
            THEN 'it must be a function (order_nos text[], source text) or (order_nos text[], source text, context jsonb) RETURNS void'
        WHEN v_p.nspname IN ('ordergate', 'ordergate_hooks', 'pg_catalog', 'information_schema')
             OR v_p.nspname LIKE 'pg\_%'
            THEN format('it is not a shop function (schema %s)', v_p.nspname)
        WHEN NOT v_p.prosecdef
            THEN 'it is not SECURITY DEFINER, so it would run as ordergate_owner'
        WHEN v_p.rolsuper
            THEN format('it is owned by %s, a superuser', v_p.rolname)
        WHEN v_p.rolname LIKE 'ordergate\_%'
            THEN format('it is owned by %s, an ordergate role', v_p.rolname)
        WHEN pg_has_role(v_p.proowner, 'ordergate_owner', 'MEMBER')
            THEN format('its owner %s is a member of ordergate_owner', v_p.rolname)
        WHEN pg_has_role(v_p.proowner, 'pg_write_all_data', 'MEMBER')
            THEN format('its owner %s may write every table (pg_write_all_data)', v_p.rolname)
        WHEN NOT EXISTS (SELECT 1 FROM unnest(v_p.proconfig) AS c(s) WHERE c.s LIKE 'search\_path=%')
            THEN 'it does not pin its own search_path (SET search_path = ...), so it would use ordergate''s'
    END;
END
$$;
COMMENT ON FUNCTION ordergate._hook_inspect(oid,boolean) IS
    'Internal: whether a function may be an effect hook (or a shop check), and its fingerprint';
