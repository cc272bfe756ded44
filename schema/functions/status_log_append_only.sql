-- status_log is append-only (OG004). TRUNCATE stays possible for the owner (test fixtures).
CREATE OR REPLACE FUNCTION ordergate.status_log_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'ordergate.status_log is append-only (% refused)', TG_OP USING ERRCODE = 'OG004';
END
$$;

CREATE OR REPLACE TRIGGER status_log_append_only BEFORE UPDATE OR DELETE ON ordergate.status_log
    FOR EACH STATEMENT EXECUTE FUNCTION ordergate.status_log_append_only();
