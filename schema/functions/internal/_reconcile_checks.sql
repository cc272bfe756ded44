-- _reconcile_checks: the shop's checks (add_check), for reconcile(), which returns these rows
-- after its built-in invariants: one row per registered check, in registration order, invariant
-- NULL (the built-in ones are numbered; a shop check is known by its name), name
-- 'shop:<name>', violations = the rows the check returned and sample = the first ten of them.
--
-- A check that cannot be run or that raises is reported failed, never skipped: violations -1
-- and sample one line saying why ("failed: <SQLSTATE> <message>", or the refusal: the function
-- is gone, no longer passes _hook_inspect, changed since add_check registered it, or its wrapper
-- is missing). Before each call the check is vetted again as add_check vetted it and its
-- fingerprint compared, as _hooks_run does for a hook; it is called through its wrapper
-- ordergate_hooks.check_<id>() (bound by OID, add_check), which must still depend on it.
--
-- Each call runs in its own subtransaction (a block with an exception handler), so a check that
-- fails leaves nothing behind and the next one runs; a cancel or a statement timeout is not
-- caught (query_canceled): reconcile() as a whole fails then, as it would in its own checks.
-- STABLE like reconcile(): a check declared STABLE reads reconcile()'s snapshot.
CREATE OR REPLACE FUNCTION ordergate._reconcile_checks()
RETURNS TABLE (invariant int, name text, violations bigint, sample text[])
LANGUAGE plpgsql STABLE SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    k       record;
    v_i     record;
    v_n     bigint;
    v_s     text[];
    v_why   text;
    v_state text;
    v_msg   text;
BEGIN
    FOR k IN SELECT c.id, c.name, c.fn, c.fn_name, c.fingerprint FROM checks c ORDER BY c.id LOOP
        v_why := NULL;
        SELECT * INTO v_i FROM _hook_inspect(k.fn, true);
        IF NOT v_i.present THEN
            v_why := format('the function %s no longer exists (drop_check(%L))', k.fn_name, k.name);
        ELSIF v_i.refusal IS NOT NULL THEN
            v_why := format('%s refused: %s', k.fn_name, v_i.refusal);
        ELSIF v_i.fingerprint <> k.fingerprint THEN
            v_why := format('%s changed since it was registered; review it, then add_check(%L, %L)',
                            k.fn_name, k.name, k.fn_name);
        ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                           WHERE d.classid = 'pg_catalog.pg_proc'::regclass
                             AND d.objid = to_regprocedure(format('ordergate_hooks.check_%s()', k.id))
                             AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                             AND d.refobjid = k.fn) THEN
            v_why := format('its wrapper ordergate_hooks.check_%s() is missing; add_check(%L, %L)',
                            k.id, k.name, k.fn_name);
        END IF;
        IF v_why IS NOT NULL THEN
            RETURN QUERY SELECT NULL::int, 'shop:' || k.name, -1::bigint, ARRAY['failed: ' || v_why];
            CONTINUE;
        END IF;
        BEGIN
            -- The wrapper's name is add_check's, made from the id: no input here.
            EXECUTE format('SELECT count(*), (array_agg(w.d))[1:10] FROM ordergate_hooks.check_%s() AS w(d)',
                           k.id)
               INTO v_n, v_s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
            v_n := -1;
            v_s := ARRAY[format('failed: %s %s', v_state, v_msg)];
        END;
        RETURN QUERY SELECT NULL::int, 'shop:' || k.name, v_n, v_s;
    END LOOP;
END
$$;
COMMENT ON FUNCTION ordergate._reconcile_checks() IS
    'Internal: runs the shop''s checks for reconcile(), one row each (violations -1: the check failed)';
