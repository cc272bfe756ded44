-- Age of the oldest unpublished event (NULL when none): the relay's lag, for metrics and alerts.
-- Quarantined events are left out: they have their own gauge and alert.
CREATE OR REPLACE FUNCTION ordergate.outbox_oldest_age() RETURNS interval
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT now() - min(b.created_at)
      FROM ordergate.outbox b
     WHERE b.published_at IS NULL AND b.quarantined_at IS NULL
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_oldest_age() TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_oldest_age() IS
    'Age of the oldest unpublished event (quarantined ones left out): the relay''s lag';
