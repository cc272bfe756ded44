-- Quarantined events (outbox_quarantine), for the relay's gauge: read from their partial index.
CREATE OR REPLACE FUNCTION ordergate.outbox_quarantine_count() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT count(*) FROM ordergate.outbox b WHERE b.quarantined_at IS NOT NULL
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_quarantine_count() TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_quarantine_count() IS
    'Quarantined events, for the relay''s gauge';
