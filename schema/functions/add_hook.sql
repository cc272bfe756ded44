-- add_hook: register a shop function to run inside every winning claim of an event
-- (docs/integrate.md, "Hooks"). Events: cancelled (claim_cancel, close_order), paid and
-- late_payment (claim_payment). The function must be fn(order_nos text[], source text) RETURNS
-- void, a plain function outside the ordergate and system schemas, executable by
-- ordergate_owner (the role the claims run as). Outcomes: added | exists (registering it again
-- is a no-op). Anything else: 22023 (42501 when ordergate_owner may not execute it), nothing
-- registered.
CREATE OR REPLACE FUNCTION ordergate.add_hook(event text, fn regprocedure)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_event text := add_hook.event;
    p_fn    oid  := add_hook.fn;
    v_p     record;
BEGIN
    IF p_event IS NULL OR p_event NOT IN ('cancelled', 'paid', 'late_payment') THEN
        PERFORM _bad_arg(format('add_hook: event must be cancelled, paid or late_payment, not %L', p_event));
    END IF;
    IF p_fn IS NULL THEN
        PERFORM _bad_arg('add_hook: fn is required, e.g. ''shop.on_cancelled(text[],text)''');
    END IF;
    SELECT p.prokind, p.prorettype, p.proretset, p.pronargs, p.proargtypes[0] AS arg0, p.proargtypes[1] AS arg1,
           p.provariadic,
           n.nspname
      INTO v_p
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = p_fn;
    IF NOT FOUND THEN
        PERFORM _bad_arg(format('add_hook: no function with oid %s', p_fn));
    END IF;
    IF v_p.prokind <> 'f' OR v_p.proretset OR v_p.prorettype <> 'void'::regtype
       OR v_p.pronargs <> 2 OR v_p.arg0 <> 'text[]'::regtype OR v_p.arg1 <> 'text'::regtype
       OR v_p.provariadic <> 0 THEN
        PERFORM _bad_arg(format('add_hook: %s must be a function (order_nos text[], source text) RETURNS void',
                                p_fn::regprocedure));
    END IF;
    IF v_p.nspname IN ('ordergate', 'pg_catalog', 'information_schema') OR v_p.nspname LIKE 'pg\_%' THEN
        PERFORM _bad_arg(format('add_hook: %s is not a shop function (schema %s)', p_fn::regprocedure,
                                v_p.nspname));
    END IF;
    IF NOT has_function_privilege('ordergate_owner', p_fn, 'EXECUTE') THEN
        RAISE EXCEPTION 'add_hook: ordergate_owner may not execute %', p_fn::regprocedure
            USING ERRCODE = '42501',
                  HINT = format('GRANT EXECUTE ON FUNCTION %s TO ordergate_owner', p_fn::regprocedure);
    END IF;

    -- Registrations serialize on the table, so concurrent add_hook calls keep registration
    -- order = id order and the (event, fn) check cannot race.
    LOCK TABLE hooks IN SHARE ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT 1 FROM hooks k WHERE k.event = p_event AND k.fn = p_fn) THEN
        RETURN 'exists';
    END IF;
    INSERT INTO hooks (event, fn, fn_name, created_by)
    VALUES (p_event, p_fn, p_fn::regprocedure::text, _actor());
    RETURN 'added';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_hook(text,regprocedure) TO ordergate_admin;
