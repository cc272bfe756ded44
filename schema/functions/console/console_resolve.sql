-- console_resolve: resolves open exceptions with a note, the login as resolver, through
-- resolve_exception; one row per id (resolved | already_resolved | not_found), each audited.
-- 1..500 distinct ids; the note is required (1..2000 characters). A bad argument changes
-- nothing (22023).
CREATE OR REPLACE FUNCTION ordergate.console_resolve(p_ids bigint[], p_note text)
RETURNS TABLE (id bigint, outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_outcome text;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) NOT BETWEEN 1 AND 500 OR array_position(p_ids, NULL) IS NOT NULL THEN
        PERFORM _bad_arg('console_resolve: 1..500 exception ids are required');
    END IF;
    IF p_note IS NULL OR length(btrim(p_note)) NOT BETWEEN 1 AND 2000 THEN
        PERFORM _bad_arg('console_resolve: a note is required (1..2000 characters)');
    END IF;
    -- Ascending ids: two bulk resolves of overlapping selections lock in the same order.
    FOR v_id IN SELECT DISTINCT u FROM unnest(p_ids) u ORDER BY u LOOP
        v_outcome := resolve_exception(v_id, session_user, p_note);
        PERFORM _console_audit('resolve', v_id::text, v_outcome,
                               jsonb_build_object('note', btrim(p_note)));
        RETURN QUERY SELECT v_id, v_outcome;
    END LOOP;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_resolve(bigint[],text) TO ordergate_console_operator;
COMMENT ON FUNCTION ordergate.console_resolve(bigint[],text) IS
    'Resolves open exceptions with a note, the console login as resolver';
