-- console_audit_list: the console's audit trail, newest first, in keyset pages: the next page
-- starts below the last row's id (p_before_id; NULL for the first page). p_limit 1..500.
CREATE OR REPLACE FUNCTION ordergate.console_audit_list(p_before_id bigint, p_limit int)
RETURNS TABLE (id bigint, at text, actor text, action text, target text, outcome text,
               detail jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 500 THEN
        PERFORM _bad_arg('console_audit_list: limit must be 1..500');
    END IF;
    RETURN QUERY
    SELECT a.id, _ctl_iso(a.at), a.actor, a.action, a.target, a.outcome, a.detail
      FROM console_audit a
     WHERE a.id < coalesce(p_before_id, 9223372036854775807)
     ORDER BY a.id DESC
     LIMIT p_limit;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_audit_list(bigint,int) TO ordergate_console_admin;
COMMENT ON FUNCTION ordergate.console_audit_list(bigint,integer) IS
    'The console''s audit trail, newest first, in keyset pages';
