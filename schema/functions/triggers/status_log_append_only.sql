-- status_log is append-only (OG004). TRUNCATE stays possible for the owner (test fixtures).
-- The one DELETE allowed is ordergate.archive() moving closed orders' rows to archived_status_log
-- (_archiving says why nobody else passes).
CREATE OR REPLACE FUNCTION ordergate.status_log_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' AND _archiving() THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'ordergate.status_log is append-only (% refused)', TG_OP USING ERRCODE = 'OG004';
END
$$;

CREATE OR REPLACE TRIGGER status_log_append_only BEFORE UPDATE OR DELETE ON ordergate.status_log
    FOR EACH STATEMENT EXECUTE FUNCTION ordergate.status_log_append_only();
COMMENT ON FUNCTION ordergate.status_log_append_only() IS
    'Trigger: status_log is append-only (OG004); only archive() may delete';
COMMENT ON TRIGGER status_log_append_only ON ordergate.status_log IS
    'No update, no delete but by archive() (OG004)';
