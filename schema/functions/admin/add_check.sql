-- add_check: register a shop check, a function reconcile() runs after its built-in invariants as
-- the invariant shop:<name> (schema/README.md, "Shop checks"). The function is
-- fn() RETURNS TABLE(detail text) (or RETURNS SETOF text): each row one violation of the shop's
-- books, its text what an operator needs to find it (the first ten are the sample); no row =
-- clean. It is vetted as a hook is (_hook_inspect with p_check: a plain function outside the
-- ordergate and system schemas, SECURITY DEFINER, owned by a role that is not a superuser, not an
-- ordergate role, not a member of ordergate_owner and not pg_write_all_data, its own SET
-- search_path) and must be executable by ordergate_owner (reconcile() runs as it).
-- name: 1..63 of [a-z0-9_], starting with a letter. Returns the check's id (checks.id). A name
-- registered already with the same function: checked again and bound again when the function
-- changed since (its fingerprint), the same id returned; with another function: 22023 (drop it
-- first). At most 64 checks (a 65th: 22023). Anything else: 22023 (42501 when ordergate_owner
-- may not execute it), nothing registered or changed.
--
-- Bound by OID as a three-argument hook is (add_hook): a wrapper ordergate_hooks.check_<id>()
-- made here with an SQL-standard body (BEGIN ATOMIC), parsed once, which stores the call to the
-- check by OID and depends on it; checked right after to depend on exactly this function.
-- reconcile() calls the wrapper (_reconcile_checks), never the check's name. Dropping the check
-- function needs CASCADE, which drops the wrapper: reconcile() then reports the check failed
-- until drop_check removes it.
CREATE OR REPLACE FUNCTION ordergate.add_check(name text, fn regprocedure)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_name text := add_check.name;
    p_fn   oid  := add_check.fn;
    v_i    record;
    v_k    record;
    v_nsp  text;
    v_pro  text;
    v_id   bigint;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]{0,62}$' THEN
        PERFORM _bad_arg(format('add_check: name must be 1..63 of [a-z0-9_] starting with a letter, not %L',
                                p_name));
    END IF;
    IF p_fn IS NULL THEN
        PERFORM _bad_arg('add_check: fn is required, e.g. ''shop.check_stock()''');
    END IF;
    SELECT * INTO v_i FROM _hook_inspect(p_fn, true);
    IF NOT v_i.present THEN
        PERFORM _bad_arg(format('add_check: no function with oid %s', p_fn));
    END IF;
    IF v_i.refusal IS NOT NULL THEN
        PERFORM _bad_arg(format('add_check: %s refused: %s', p_fn::regprocedure, v_i.refusal));
    END IF;
    IF NOT has_function_privilege('ordergate_owner', p_fn, 'EXECUTE') THEN
        RAISE EXCEPTION 'add_check: ordergate_owner may not execute %', p_fn::regprocedure
            USING ERRCODE = '42501',
                  HINT = format('GRANT EXECUTE ON FUNCTION %s TO ordergate_owner', p_fn::regprocedure);
    END IF;
    SELECT n.nspname, p.proname INTO v_nsp, v_pro
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = p_fn;

    -- Registrations serialize on the table (as add_hook's).
    LOCK TABLE checks IN SHARE ROW EXCLUSIVE MODE;
    SELECT k.id, k.fn, k.fingerprint,
           EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_proc'::regclass
                      AND d.objid = to_regprocedure(format('ordergate_hooks.check_%s()', k.id))
                      AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                      AND d.refobjid = k.fn) AS bound
      INTO v_k
      FROM checks k WHERE k.name = p_name;
    IF v_k.id IS NULL AND (SELECT count(*) FROM checks) >= 64 THEN
        -- ordergate-scanner --reconcile reports at most this many (scanner/reconcile.h).
        PERFORM _bad_arg('add_check: 64 checks are registered already, the most reconcile reports');
    END IF;
    IF v_k.id IS NOT NULL THEN
        IF v_k.fn <> p_fn THEN
            PERFORM _bad_arg(format('add_check: %s is registered for %s already (drop_check(%L) first)',
                                    p_name, (SELECT c.fn_name FROM checks c WHERE c.id = v_k.id), p_name));
        END IF;
        IF v_k.fingerprint = v_i.fingerprint AND v_k.bound THEN
            RETURN v_k.id;
        END IF;
        v_id := v_k.id;
    ELSE
        INSERT INTO checks (name, fn, fn_name, fingerprint, created_by)
        VALUES (p_name, p_fn, p_fn::regprocedure::text, v_i.fingerprint, _actor())
        RETURNING id INTO v_id;
    END IF;

    -- The wrapper's name is made from the id, never from input; the check is named by its
    -- catalog schema and name, quoted, with no arguments: an exact match.
    EXECUTE format('DROP FUNCTION IF EXISTS ordergate_hooks.check_%s()', v_id);
    EXECUTE format('CREATE FUNCTION ordergate_hooks.check_%s() RETURNS SETOF text LANGUAGE sql STABLE '
                   'SET search_path = pg_catalog, pg_temp '
                   'BEGIN ATOMIC SELECT c.detail FROM %I.%I() AS c(detail); END',
                   v_id, v_nsp, v_pro);
    EXECUTE format('COMMENT ON FUNCTION ordergate_hooks.check_%s() IS %L',
                   v_id, format('Runs the shop check %s (%s) by OID', p_name, p_fn::regprocedure));
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_proc'::regclass
                      AND d.objid = format('ordergate_hooks.check_%s()', v_id)::regprocedure
                      AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                      AND d.refobjid = p_fn) THEN
        RAISE EXCEPTION 'add_check: the wrapper made for % does not call it', p_fn::regprocedure
            USING ERRCODE = 'XX000';
    END IF;
    UPDATE checks k
       SET fingerprint = v_i.fingerprint, fn_name = p_fn::regprocedure::text
     WHERE k.id = v_id;
    RETURN v_id;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_check(text,regprocedure) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.add_check(text,regprocedure) IS
    'Registers a shop check that reconcile() runs as the invariant shop:<name>, after checking it may';
