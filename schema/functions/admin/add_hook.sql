-- add_hook: register a shop function to run inside every winning claim of an event
-- (docs/integrate.md, "Hooks"). Events: cancelled (claim_cancel, close_order), paid and
-- late_payment (claim_payment). The function must pass _hook_inspect (fn(order_nos text[],
-- source text) RETURNS void outside the ordergate and system schemas, SECURITY DEFINER, owned by
-- a role that is not a superuser, not an ordergate role and not a member of ordergate_owner, its
-- own SET search_path) and be executable by ordergate_owner (the role the claims run as).
-- Outcomes: added | exists (registered already, unchanged: a no-op) | updated (registered
-- already, but changed since, or registered before the checks existed: checked again, and its
-- claims run it again). Anything else: 22023 (42501 when ordergate_owner may not execute it),
-- nothing registered or changed.
--
-- The registration binds the function by OID: an operator ordergate_hooks.@<id in base 8>
-- (text[] OPERATOR text) whose function is this one, which _hooks_run calls. The operator's
-- name is made here from the id, never from input; the function is named to CREATE OPERATOR by
-- its catalog schema and name (quoted) with the exact argument types, which resolves to exactly
-- this function (no default arguments, no variadics), checked right after.
CREATE OR REPLACE FUNCTION ordergate.add_hook(event text, fn regprocedure)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_event text := add_hook.event;
    p_fn    oid  := add_hook.fn;
    v_i     record;
    v_k     record;
    v_nsp   text;
    v_name  text;
    v_id    bigint;
    v_n     bigint;
    v_op    text;
    v_out   text;
BEGIN
    IF p_event IS NULL OR p_event NOT IN ('cancelled', 'paid', 'late_payment') THEN
        PERFORM _bad_arg(format('add_hook: event must be cancelled, paid or late_payment, not %L', p_event));
    END IF;
    IF p_fn IS NULL THEN
        PERFORM _bad_arg('add_hook: fn is required, e.g. ''shop.on_cancelled(text[],text)''');
    END IF;
    SELECT * INTO v_i FROM _hook_inspect(p_fn);
    IF NOT v_i.found THEN
        PERFORM _bad_arg(format('add_hook: no function with oid %s', p_fn));
    END IF;
    IF v_i.refusal IS NOT NULL THEN
        PERFORM _bad_arg(format('add_hook: %s refused: %s', p_fn::regprocedure, v_i.refusal));
    END IF;
    IF NOT has_function_privilege('ordergate_owner', p_fn, 'EXECUTE') THEN
        RAISE EXCEPTION 'add_hook: ordergate_owner may not execute %', p_fn::regprocedure
            USING ERRCODE = '42501',
                  HINT = format('GRANT EXECUTE ON FUNCTION %s TO ordergate_owner', p_fn::regprocedure);
    END IF;
    SELECT n.nspname, p.proname INTO v_nsp, v_name
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = p_fn;

    -- Registrations serialize on the table, so concurrent add_hook calls keep registration
    -- order = id order and the (event, fn) check cannot race.
    LOCK TABLE hooks IN SHARE ROW EXCLUSIVE MODE;
    SELECT k.id, k.opname, k.fingerprint,
           EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                    WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                      AND o.oprname = k.opname AND o.oprcode = k.fn) AS bound
      INTO v_k
      FROM hooks k WHERE k.event = p_event AND k.fn = p_fn;
    IF FOUND THEN
        IF v_k.fingerprint = v_i.fingerprint AND v_k.bound THEN
            RETURN 'exists';
        END IF;
        v_id := v_k.id;
        v_out := 'updated';
    ELSE
        INSERT INTO hooks (event, fn, fn_name, created_by)
        VALUES (p_event, p_fn, p_fn::regprocedure::text, _actor())
        RETURNING id INTO v_id;
        v_out := 'added';
    END IF;

    -- The id in base 8 over eight operator characters (none of + - * /, so no name can end in
    -- one or hold a comment start), behind '@'.
    v_n := v_id;
    v_op := '';
    LOOP
        v_op := substr('~!@#%^&|', (v_n % 8)::int + 1, 1) || v_op;
        v_n := v_n / 8;
        EXIT WHEN v_n = 0;
    END LOOP;
    v_op := '@' || v_op;
    IF v_k.opname IS NOT NULL THEN
        EXECUTE format('DROP OPERATOR IF EXISTS ordergate_hooks.%s (text[], text)', v_k.opname);
    END IF;
    EXECUTE format('CREATE OPERATOR ordergate_hooks.%s (LEFTARG = text[], RIGHTARG = text, FUNCTION = %I.%I)',
                   v_op, v_nsp, v_name);
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                    WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                      AND o.oprname = v_op AND o.oprcode = p_fn) THEN
        RAISE EXCEPTION 'add_hook: the operator made for % does not call it', p_fn::regprocedure
            USING ERRCODE = 'XX000';
    END IF;
    UPDATE hooks k
       SET opname = v_op, fingerprint = v_i.fingerprint, fn_name = p_fn::regprocedure::text
     WHERE k.id = v_id;
    RETURN v_out;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_hook(text,regprocedure) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.add_hook(text,regprocedure) IS
    'Registers a shop function to run inside every winning claim of an event, after checking it may';
