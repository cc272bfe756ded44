-- drop_hook: remove a hook registration, by event and function or by its id (hooks.id: the one
-- way to remove a registration whose function was dropped, since its name no longer casts to
-- regprocedure), with the operator that bound it and, for a three-argument hook, its wrapper
-- ordergate_hooks.hook_<id> (add_hook). Outcomes: dropped | not_found.
CREATE OR REPLACE FUNCTION ordergate.drop_hook(event text, fn regprocedure)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF drop_hook.event IS NULL
       OR drop_hook.event NOT IN ('cancelled', 'paid', 'late_payment', 'payment_exception', 'refund_result',
                                  'released', 'amended', 'deadline_changed') THEN
        PERFORM _bad_arg(format('drop_hook: event must be cancelled, paid, late_payment, payment_exception, '
                                'refund_result, released, amended or deadline_changed, not %L',
                                drop_hook.event));
    END IF;
    IF drop_hook.fn IS NULL THEN
        PERFORM _bad_arg('drop_hook: fn is required');
    END IF;
    SELECT k.id INTO v_id FROM hooks k WHERE k.event = drop_hook.event AND k.fn = drop_hook.fn::oid;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    RETURN drop_hook(v_id);
END
$$;

CREATE OR REPLACE FUNCTION ordergate.drop_hook(hook_id bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_op text;
BEGIN
    IF drop_hook.hook_id IS NULL THEN
        PERFORM _bad_arg('drop_hook: hook_id is required');
    END IF;
    DELETE FROM hooks k WHERE k.id = drop_hook.hook_id RETURNING k.opname INTO v_op;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    -- opname is add_hook's own (the table's check admits operator characters only). Already
    -- gone when the shop dropped its function with CASCADE.
    IF v_op IS NOT NULL THEN
        EXECUTE format('DROP OPERATOR IF EXISTS ordergate_hooks.%s (text[], text)', v_op);
        EXECUTE format('DROP OPERATOR IF EXISTS ordergate_hooks.%s (text[], ordergate_hooks.hook_call)', v_op);
    END IF;
    EXECUTE format('DROP FUNCTION IF EXISTS ordergate_hooks.hook_%s(text[], ordergate_hooks.hook_call)',
                   drop_hook.hook_id);
    RETURN 'dropped';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.drop_hook(text,regprocedure) TO ordergate_admin;
GRANT EXECUTE ON FUNCTION ordergate.drop_hook(bigint) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.drop_hook(text,regprocedure) IS
    'Removes a hook registration by event and function';
COMMENT ON FUNCTION ordergate.drop_hook(bigint) IS
    'Removes a hook registration by id (also one whose function was dropped)';
