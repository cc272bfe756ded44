-- console_overview: the live figures of the console's first page, in one snapshot. Every part
-- reads an index over a bounded range, never a whole table (docs/console.md, "Speed"):
--   pending       orders pending payment, counted up to 100000 (capped: true above it), and how
--                 many are overdue or fall due within 1, 5 and 60 minutes (orders_overdue_idx)
--   cancels       [{"minute", "source", "n"}]: cancels of the last hour by minute and source
--                 (consumer, scanner, manual), from orders_closed_at_idx
--   lateness      p50_s, p99_s: seconds from due to cancel of the consumer's and the scanner's
--                 cancels of the last hour
--   exceptions    [{"kind", "age", "n"}]: open exceptions by kind and age (lt_1h, lt_1d, older)
--   refunds       requested (open auto_refund, no result yet) and overdue reviews (open
--                 manual_review older than manual_review_max_age_seconds)
--   outbox        backlog and the oldest unpublished event's age in seconds
--   scanner       the newest run: status, started_at, finished_at, cancelled, age_s
CREATE OR REPLACE FUNCTION ordergate.console_overview() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    WITH pend AS (
        SELECT o.expire_at FROM orders o WHERE o.status = 'pending_payment' LIMIT 100001
    ), soon AS (
        SELECT o.expire_at FROM orders o
         WHERE o.status = 'pending_payment' AND o.expire_at < now() + interval '60 minutes'
         LIMIT 100001
    ), closed AS (
        SELECT o.closed_at, o.expire_at, s.source
          FROM orders o JOIN status_log s ON s.order_no = o.order_no
         WHERE o.status = 'cancelled' AND o.status <> 'pending_payment'
           AND o.closed_at >= now() - interval '1 hour'
    ), exc AS (
        SELECT e.kind, CASE WHEN e.created_at > now() - interval '1 hour' THEN 'lt_1h'
                            WHEN e.created_at > now() - interval '1 day' THEN 'lt_1d'
                            ELSE 'older' END AS age, e.resolution, e.created_at
          FROM exceptions e WHERE e.state = 'open'
    )
    SELECT jsonb_build_object(
        'now', _ctl_iso(now()),
        'pending', (SELECT jsonb_build_object(
                        'total', least(count(*), 100000), 'capped', count(*) > 100000)
                      FROM pend),
        'due', (SELECT jsonb_build_object(
                    'overdue', count(*) FILTER (WHERE s.expire_at <= now()),
                    'in_1m', count(*) FILTER (WHERE s.expire_at > now()
                                                AND s.expire_at <= now() + interval '1 minute'),
                    'in_5m', count(*) FILTER (WHERE s.expire_at > now()
                                                AND s.expire_at <= now() + interval '5 minutes'),
                    'in_60m', count(*) FILTER (WHERE s.expire_at > now()),
                    'capped', count(*) > 100000)
                  FROM soon s),
        'cancels', (SELECT coalesce(jsonb_agg(jsonb_build_object('minute', _ctl_iso(m.minute),
                                                                 'source', m.source, 'n', m.n)
                                              ORDER BY m.minute, m.source), '[]'::jsonb)
                      FROM (SELECT date_trunc('minute', c.closed_at) AS minute,
                                   CASE c.source WHEN 'timeout_consumer' THEN 'consumer'
                                                 WHEN 'timeout_scanner' THEN 'scanner'
                                                 ELSE 'manual' END AS source,
                                   count(*) AS n
                              FROM closed c GROUP BY 1, 2) m),
        'lateness', (SELECT jsonb_build_object(
                         'n', count(*),
                         'p50_s', percentile_cont(0.5) WITHIN GROUP (ORDER BY
                                      extract(epoch FROM c.closed_at - c.expire_at)),
                         'p99_s', percentile_cont(0.99) WITHIN GROUP (ORDER BY
                                      extract(epoch FROM c.closed_at - c.expire_at)))
                       FROM closed c WHERE c.source IN ('timeout_consumer', 'timeout_scanner')),
        'exceptions', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', x.kind, 'age', x.age,
                                                                    'n', x.n)
                                                 ORDER BY x.kind, x.age), '[]'::jsonb)
                         FROM (SELECT kind, age, count(*) AS n FROM exc GROUP BY 1, 2) x),
        'refunds', (SELECT jsonb_build_object(
                        'requested', count(*) FILTER (WHERE x.resolution = 'auto_refund'),
                        'overdue_reviews', count(*) FILTER (
                            WHERE x.resolution = 'manual_review'
                              AND x.created_at < now() - make_interval(
                                  secs => _setting_bigint('manual_review_max_age_seconds', 259200))))
                      FROM exc x),
        'outbox', jsonb_build_object(
            'backlog', (SELECT count(*) FROM (SELECT 1 FROM outbox b
                                               WHERE b.published_at IS NULL
                                                 AND b.quarantined_at IS NULL
                                               LIMIT 100001) q),
            'oldest_age_s', (SELECT extract(epoch FROM now() - min(b.created_at))
                               FROM outbox b
                              WHERE b.published_at IS NULL AND b.quarantined_at IS NULL)),
        'scanner', (SELECT jsonb_build_object('run_id', r.run_id, 'status', r.status,
                                              'started_at', _ctl_iso(r.started_at),
                                              'finished_at', _ctl_iso(r.finished_at),
                                              'cancelled', r.cancelled,
                                              'age_s', extract(epoch FROM now() - r.started_at))
                      FROM scanner_runs r ORDER BY r.started_at DESC LIMIT 1));
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_overview() TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_overview() IS
    'The console overview: pending and due orders, cancels, lateness, exceptions, outbox, scanner';
