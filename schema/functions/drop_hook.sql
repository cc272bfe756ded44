-- drop_hook: remove a hook registration, by event and function or by its id (hooks.id: the one
-- way to remove a registration whose function was dropped, since its name no longer casts to
-- regprocedure). Outcomes: dropped | not_found.
CREATE OR REPLACE FUNCTION ordergate.drop_hook(event text, fn regprocedure)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF drop_hook.event IS NULL OR drop_hook.event NOT IN ('cancelled', 'paid', 'late_payment') THEN
        PERFORM _bad_arg(format('drop_hook: event must be cancelled, paid or late_payment, not %L',
                                drop_hook.event));
    END IF;
    IF drop_hook.fn IS NULL THEN
        PERFORM _bad_arg('drop_hook: fn is required');
    END IF;
    DELETE FROM hooks k WHERE k.event = drop_hook.event AND k.fn = drop_hook.fn::oid;
    RETURN CASE WHEN FOUND THEN 'dropped' ELSE 'not_found' END;
END
$$;

CREATE OR REPLACE FUNCTION ordergate.drop_hook(hook_id bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF drop_hook.hook_id IS NULL THEN
        PERFORM _bad_arg('drop_hook: hook_id is required');
    END IF;
    DELETE FROM hooks k WHERE k.id = drop_hook.hook_id;
    RETURN CASE WHEN FOUND THEN 'dropped' ELSE 'not_found' END;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.drop_hook(text,regprocedure) TO ordergate_admin;
GRANT EXECUTE ON FUNCTION ordergate.drop_hook(bigint) TO ordergate_admin;
