-- console_close: closes a pending order by hand through close_order, the login as the status
-- log's actor and the reason as its note; audited. Outcomes as close_order: cancelled |
-- already_cancelled | already_paid | not_found. The reason is required (1..2000 characters).
CREATE OR REPLACE FUNCTION ordergate.console_close(p_order_no text, p_reason text)
RETURNS TABLE (outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_outcome text;
    v_status text;
BEGIN
    SELECT c.outcome, c.status INTO v_outcome, v_status
      FROM close_order(p_order_no, session_user, p_reason) c;
    PERFORM _console_audit('close', p_order_no, v_outcome,
                           jsonb_build_object('reason', btrim(p_reason)));
    RETURN QUERY SELECT v_outcome, v_status;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_close(text,text) TO ordergate_console_operator;
COMMENT ON FUNCTION ordergate.console_close(text,text) IS
    'Closes a pending order by hand with a reason, the console login as actor';
