-- resolve_exception: an operator closes a follow-up. resolved | already_resolved | not_found.
CREATE OR REPLACE FUNCTION ordergate.resolve_exception(p_id bigint, p_operator text, p_note text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_state text;
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('resolve_exception: id is required');
    END IF;
    IF p_operator IS NULL OR length(btrim(p_operator)) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('resolve_exception: operator is required (1..128 characters)');
    END IF;
    UPDATE exceptions e
       SET state = 'resolved', resolved_at = now(), resolved_by = btrim(p_operator),
           note = CASE WHEN p_note IS NULL OR btrim(p_note) = '' THEN e.note
                       ELSE concat_ws(E'\n', e.note, btrim(p_note)) END
     WHERE e.id = p_id AND e.state = 'open';
    IF FOUND THEN
        RETURN 'resolved';
    END IF;
    SELECT e.state INTO v_state FROM exceptions e WHERE e.id = p_id;
    RETURN CASE WHEN v_state IS NULL THEN 'not_found' ELSE 'already_resolved' END;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.resolve_exception(bigint,text,text) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.resolve_exception(bigint,text,text) IS
    'An operator closes an open payment follow-up';
