-- Assertion helpers for the SQL-level tests (tests/sql/run.sh loads this into each test database).
-- Each result is reported as a WARNING line "og-test|ok|file|name|info" (or FAIL): a message
-- reaches the client at once and survives a ROLLBACK, so a test may plant a violation inside a
-- transaction and roll it back. t_error(name, sql, sqlstate) runs a test-owned statement and
-- expects it to fail with that SQLSTATE (EXECUTE here runs only the test files' own literals).
CREATE FUNCTION public.t_check(p_name text, p_ok boolean, p_info text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'og-test|%|%|%|%', CASE WHEN coalesce(p_ok, false) THEN 'ok' ELSE 'FAIL' END,
        coalesce(current_setting('og.test_file', true), '-'), p_name, coalesce(p_info, '');
END
$$;

CREATE FUNCTION public.t_eq(p_name text, p_got anyelement, p_want anyelement) RETURNS void
LANGUAGE sql AS $$
    SELECT public.t_check(p_name, p_got IS NOT DISTINCT FROM p_want,
                          CASE WHEN p_got IS DISTINCT FROM p_want
                               THEN format('got %s, want %s', p_got, p_want) END)
$$;

CREATE FUNCTION public.t_error(p_name text, p_sql text, p_sqlstate text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
    v_msg   text;
BEGIN
    BEGIN
        EXECUTE p_sql;
        PERFORM public.t_check(p_name, false, format('no error, want SQLSTATE %s', p_sqlstate));
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
    END;
    PERFORM public.t_check(p_name, v_state = p_sqlstate,
        CASE WHEN v_state <> p_sqlstate THEN format('SQLSTATE %s (%s), want %s', v_state, v_msg, p_sqlstate) END);
END
$$;

-- Violations of one invariant.
CREATE FUNCTION public.t_viol(p_invariant int) RETURNS bigint
LANGUAGE sql AS $$
    SELECT r.violations FROM ordergate.reconcile() r WHERE r.invariant = p_invariant
$$;
