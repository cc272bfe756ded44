-- drop_check: remove a shop check registration (add_check) by name, with its wrapper
-- ordergate_hooks.check_<id> (already gone when the shop dropped its function with CASCADE).
-- Outcomes: dropped | not_found. A malformed name: 22023.
CREATE OR REPLACE FUNCTION ordergate.drop_check(name text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF drop_check.name IS NULL OR drop_check.name !~ '^[a-z][a-z0-9_]{0,62}$' THEN
        PERFORM _bad_arg(format('drop_check: name must be 1..63 of [a-z0-9_] starting with a letter, not %L',
                                drop_check.name));
    END IF;
    DELETE FROM checks k WHERE k.name = drop_check.name RETURNING k.id INTO v_id;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    EXECUTE format('DROP FUNCTION IF EXISTS ordergate_hooks.check_%s()', v_id);
    RETURN 'dropped';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.drop_check(text) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.drop_check(text) IS
    'Removes a shop check registration by name';
