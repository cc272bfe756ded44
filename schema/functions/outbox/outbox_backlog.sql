-- Unpublished events: the relay's backlog, for metrics. Quarantined events are not waiting for
-- the relay (outbox_quarantine_count counts them).
CREATE OR REPLACE FUNCTION ordergate.outbox_backlog() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT count(*)
      FROM ordergate.outbox b
     WHERE b.published_at IS NULL AND b.quarantined_at IS NULL
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_backlog() TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_backlog() IS
    'Unpublished events waiting for the relay (quarantined ones left out), for metrics';
