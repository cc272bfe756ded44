-- add_hook: register a shop function to run inside every winning claim of an event
-- (docs/integrate.md, "Hooks"; schema/README.md, "Effect hooks", for the events and the context
-- each passes). Events: cancelled (claim_cancel, close_order), paid and late_payment
-- (claim_payment), payment_exception (claim_payment's double_payment, amount_mismatch,
-- currency_mismatch, not_found), refund_result (record_refund), released, amended and
-- deadline_changed (the staff acts). The function must pass _hook_inspect (fn(order_nos text[],
-- source text) or fn(order_nos text[], source text, context jsonb) RETURNS void outside the
-- ordergate and system schemas, SECURITY DEFINER, owned by a role that is not a superuser, not
-- an ordergate role and not a member of ordergate_owner, its own SET search_path) and be
-- executable by ordergate_owner (the role the claims run as).
-- Outcomes: added | exists (registered already, unchanged: a no-op) | updated (registered
-- already, but changed since, or registered before the checks existed: checked again, and its
-- claims run it again). Anything else: 22023 (42501 when ordergate_owner may not execute it),
-- nothing registered or changed.
--
-- The registration binds the function by OID: an operator ordergate_hooks.@<id in base 8>,
-- which _hooks_run calls. The operator's name is made here from the id, never from input.
--  - A two-argument hook is the operator's function (text[] OPERATOR text): the function is
--    named to CREATE OPERATOR by its catalog schema and name (quoted) with the exact argument
--    types, which resolves to exactly this function (no default arguments, no variadics),
--    checked right after (the operator's oprcode is its OID).
--  - An operator has two operands, so a three-argument hook is called by a wrapper made here,
--    ordergate_hooks.hook_<id>(text[], ordergate_hooks.hook_call) (source and context in one
--    composite operand), which is the operator's function. The wrapper's body is SQL-standard
--    (BEGIN ATOMIC): PostgreSQL parses it once, here, and stores the parsed call, which names
--    the hook by OID and records a dependency on it; no later call resolves the name again, so
--    an overload added afterwards (a "v2" with a defaulted parameter) is never called and never
--    makes the call ambiguous. The name is resolved once, here, with the exact argument types
--    (an exact match wins; a defaulted overload made before would make it ambiguous: 42725),
--    and checked right after: the wrapper must depend on exactly this function. Dropping the
--    hook function needs CASCADE, which drops the wrapper and the operator with it, as it drops
--    a two-argument hook's operator.
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
    v_nargs smallint;
    v_op    text;
    v_out   text;
BEGIN
    IF p_event IS NULL OR p_event NOT IN ('cancelled', 'paid', 'late_payment', 'payment_exception',
                                          'refund_result', 'released', 'amended', 'deadline_changed') THEN
        PERFORM _bad_arg(format('add_hook: event must be cancelled, paid, late_payment, payment_exception, '
                                'refund_result, released, amended or deadline_changed, not %L', p_event));
    END IF;
    IF p_fn IS NULL THEN
        PERFORM _bad_arg('add_hook: fn is required, e.g. ''shop.on_cancelled(text[],text)''');
    END IF;
    SELECT * INTO v_i FROM _hook_inspect(p_fn);
    IF NOT v_i.present THEN
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
    SELECT n.nspname, p.proname, p.pronargs INTO v_nsp, v_name, v_nargs
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = p_fn;

    -- Registrations serialize on the table, so concurrent add_hook calls keep registration
    -- order = id order and the (event, fn) check cannot race.
    LOCK TABLE hooks IN SHARE ROW EXCLUSIVE MODE;
    SELECT k.id, k.opname, k.fingerprint, k.nargs,
           EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                    WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                      AND o.oprname = k.opname
                      AND (o.oprcode = k.fn
                           OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                                       WHERE d.classid = 'pg_catalog.pg_proc'::regclass
                                         AND d.objid = o.oprcode
                                         AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                                         AND d.refobjid = k.fn))) AS bound
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
    -- The previous binding (changed since, or made before the checks), whatever its form.
    IF v_k.opname IS NOT NULL THEN
        EXECUTE format('DROP OPERATOR IF EXISTS ordergate_hooks.%s (text[], text)', v_k.opname);
        EXECUTE format('DROP OPERATOR IF EXISTS ordergate_hooks.%s (text[], ordergate_hooks.hook_call)',
                       v_k.opname);
    END IF;
    EXECUTE format('DROP FUNCTION IF EXISTS ordergate_hooks.hook_%s(text[], ordergate_hooks.hook_call)', v_id);
    IF v_nargs = 2 THEN
        EXECUTE format('CREATE OPERATOR ordergate_hooks.%s (LEFTARG = text[], RIGHTARG = text, FUNCTION = %I.%I)',
                       v_op, v_nsp, v_name);
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                        WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                          AND o.oprname = v_op AND o.oprcode = p_fn) THEN
            RAISE EXCEPTION 'add_hook: the operator made for % does not call it', p_fn::regprocedure
                USING ERRCODE = 'XX000';
        END IF;
    ELSE
        EXECUTE format('CREATE FUNCTION ordergate_hooks.hook_%s(p_nos text[], p_call ordergate_hooks.hook_call) '
                       'RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp '
                       'BEGIN ATOMIC SELECT %I.%I(p_nos, (p_call).source, (p_call).context); END',
                       v_id, v_nsp, v_name);
        EXECUTE format('COMMENT ON FUNCTION ordergate_hooks.hook_%s(text[], ordergate_hooks.hook_call) IS %L',
                       v_id, format('Calls the hook %s (hooks.id %s) by OID', p_fn::regprocedure, v_id));
        EXECUTE format('CREATE OPERATOR ordergate_hooks.%s (LEFTARG = text[], RIGHTARG = ordergate_hooks.hook_call, '
                       'FUNCTION = ordergate_hooks.hook_%s)', v_op, v_id);
        -- The wrapper calls one function: it must be this one, named by OID in its stored body.
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                         JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass
                                                    AND d.objid = o.oprcode
                                                    AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                                                    AND d.refobjid = p_fn
                        WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                          AND o.oprname = v_op
                          AND o.oprcode = format('ordergate_hooks.hook_%s(text[], ordergate_hooks.hook_call)',
                                                 v_id)::regprocedure) THEN
            RAISE EXCEPTION 'add_hook: the wrapper made for % does not call it', p_fn::regprocedure
                USING ERRCODE = 'XX000';
        END IF;
    END IF;
    UPDATE hooks k
       SET opname = v_op, fingerprint = v_i.fingerprint, fn_name = p_fn::regprocedure::text,
           nargs = v_nargs
     WHERE k.id = v_id;
    RETURN v_out;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_hook(text,regprocedure) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.add_hook(text,regprocedure) IS
    'Registers a shop function to run inside every winning claim of an event, after checking it may';
