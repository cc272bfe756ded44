-- exceptions_open_count: payment exceptions still waiting (manual review, or a refund not yet
-- confirmed); exported by --reconcile as ordergate_exceptions_open.
CREATE OR REPLACE FUNCTION ordergate.exceptions_open_count() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT count(*) FROM ordergate.exceptions e WHERE e.state = 'open'
$$;

GRANT EXECUTE ON FUNCTION ordergate.exceptions_open_count() TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.exceptions_open_count() IS
    'Payment exceptions still open, for the scanner''s --reconcile gauge';
