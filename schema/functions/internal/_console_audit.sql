-- _console_audit: one row of the console's audit trail, written in the caller's transaction, so
-- that a write and its record commit or vanish together. The actor is always the login
-- (session_user): the console runs every request as the person's own database login.
CREATE OR REPLACE FUNCTION ordergate._console_audit(p_action text, p_target text, p_outcome text,
                                                    p_detail jsonb)
RETURNS void
LANGUAGE sql SET search_path = ordergate, pg_temp AS $$
    INSERT INTO console_audit (actor, action, target, outcome, detail)
    VALUES (session_user, p_action, p_target, p_outcome, p_detail);
$$;

COMMENT ON FUNCTION ordergate._console_audit(text,text,text,jsonb) IS
    'Internal: records one console write with the login as its actor';
