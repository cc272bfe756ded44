-- console_overview: the live figures of the console's first page, in one snapshot. Every part
-- reads an index over a bounded range, never a whole table (docs/console.md, "Speed"):
--   pending       orders pending payment: counted up to 10000, above that the planner's count of
--                 orders_overdue_idx's entries (estimated: true); due: how many are overdue or
--                 fall due within 1, 5 and 60 minutes, counted in deadline order up to 10000
--                 (capped: true when the hour holds more; the first buckets stay exact)
--   cancels       [{"minute", "source", "n"}]: cancels of the last hour by minute and source
--                 (consumer, scanner, manual): the minutes the scanner's sweep counted
--                 (console_cancel_minutes), the rest from orders_closed_at_idx and status_log's key
--   cancels_live_from  the first minute counted from the orders themselves (the minutes before
--                 it come from the sweep's counts)
--   lateness      n, p50_s, p99_s: seconds from due to cancel of the latest 1000 cancels of the
--                 consumer and the scanner within the last hour
--   exceptions    [{"kind", "age", "n"}]: open exceptions by kind and age (lt_1h, lt_1d, older),
--                 from exceptions_open_kind_idx
--   refunds       requested (open auto_refund, no result yet), unconfirmed (of those, older
--                 than refund_confirm_seconds) and overdue reviews (open manual_review older than
--                 manual_review_max_age_seconds), as exceptions_overdue counts them
--   outbox        backlog and the oldest unpublished event's age in seconds
--   scanner       the newest run: status, started_at, finished_at, cancelled, age_s
--   reconcile     the newest reconciliation (reconcile_runs): result (clean, violated, failed),
--                 started_at, finished_at, age_s (since it finished), since (NULL: every order),
--                 violated [{"name", "n"}] (invariants by number, shop:NAME checks; n -1: the
--                 check failed), repaired, detail (why a failed run failed); NULL: none recorded
-- jit = off: the planner's estimates for the sixty per-minute ranges grow with the tables (not
-- what they read), and past jit_above_cost a call compiled and optimized its expressions first:
-- at 10 million orders that took 1.4 s of the call's CPU for a read of about 30,000 index
-- entries (docs/results/2026-12-07-console.md).
CREATE OR REPLACE FUNCTION ordergate.console_overview() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp SET jit = off AS $$
    WITH pend AS (
        SELECT 1 FROM orders o WHERE o.status = 'pending_payment' LIMIT 10001
    ), soon AS (
        SELECT o.expire_at FROM orders o
         WHERE o.status = 'pending_payment' AND o.expire_at < now() + interval '60 minutes'
         ORDER BY o.expire_at
         LIMIT 10001
    ), rolled AS (
        -- The finished minutes the scanner's sweep counted (console_cancel_minutes), sixty rows
        -- at most; the minutes after the newest of them are counted here from orders and
        -- status_log (_console_cancels: one lookup per cancel), a few minutes while the scanner
        -- runs, the whole hour when it does not.
        SELECT r.minute, r.consumer, r.scanner, r.manual
          FROM console_cancel_minutes r
         WHERE r.minute >= date_trunc('minute', now()) - interval '59 minutes'
           AND r.minute <= date_trunc('minute', now())
    ), live_from AS (
        SELECT greatest(max(r.minute) + interval '1 minute',
                        date_trunc('minute', now()) - interval '59 minutes') AS minute
          FROM rolled r
    ), cancels AS (
        SELECT m.minute, v.source, v.n
          FROM (SELECT * FROM rolled
                UNION ALL
                SELECT c.* FROM live_from f,
                       _console_cancels(f.minute, date_trunc('minute', now()) + interval '1 minute') c) m,
               LATERAL (VALUES ('consumer', m.consumer), ('scanner', m.scanner),
                               ('manual', m.manual)) v(source, n)
         WHERE v.n > 0
    ), late AS (
        SELECT extract(epoch FROM o.closed_at - o.expire_at) AS s
          FROM orders o
          JOIN status_log s ON s.order_no = o.order_no AND s.from_status = 'pending_payment'
         WHERE o.status <> 'pending_payment' AND o.status = 'cancelled'
           AND o.closed_at >= now() - interval '1 hour'
           AND s.source IN ('timeout_consumer', 'timeout_scanner')
         ORDER BY o.closed_at DESC
         LIMIT 1000
    ), bounds AS MATERIALIZED (
        -- The open exceptions' age limits, computed once: compared per row, each FILTER below
        -- would compute its now() - interval again for every one of the open exceptions.
        SELECT now() - interval '1 hour' AS h1, now() - interval '1 day' AS d1,
               now() - make_interval(secs => _setting_bigint('refund_confirm_seconds', 86400))
                   AS refund_due,
               now() - make_interval(secs => _setting_bigint('manual_review_max_age_seconds',
                                                             259200)) AS review_due
    ), exc AS (
        -- One pass over exceptions_open_kind_idx in kind order (index only: kind, age and
        -- resolution are in it), no hashing.
        SELECT e.kind,
               count(*) FILTER (WHERE e.created_at > b.h1) AS lt_1h,
               count(*) FILTER (WHERE e.created_at <= b.h1 AND e.created_at > b.d1) AS lt_1d,
               count(*) FILTER (WHERE e.created_at <= b.d1) AS older,
               count(*) FILTER (WHERE e.resolution = 'auto_refund') AS requested,
               count(*) FILTER (WHERE e.resolution = 'auto_refund'
                                  AND e.created_at < b.refund_due) AS unconfirmed,
               count(*) FILTER (WHERE e.resolution = 'manual_review'
                                  AND e.created_at < b.review_due) AS overdue
          FROM bounds b, exceptions e
         WHERE e.state = 'open'
         GROUP BY e.kind
    )
    SELECT jsonb_build_object(
        'now', _ctl_iso(now()),
        'pending', (SELECT CASE WHEN count(*) <= 10000
                                THEN jsonb_build_object('total', count(*), 'estimated', false)
                                ELSE jsonb_build_object(
                                    'total', (SELECT greatest(c.reltuples, 10001)::bigint
                                                FROM pg_class c
                                               WHERE c.oid = 'ordergate.orders_overdue_idx'::regclass),
                                    'estimated', true) END
                      FROM pend),
        'due', (SELECT jsonb_build_object(
                    'overdue', count(*) FILTER (WHERE s.expire_at <= now()),
                    'in_1m', count(*) FILTER (WHERE s.expire_at > now()
                                                AND s.expire_at <= now() + interval '1 minute'),
                    'in_5m', count(*) FILTER (WHERE s.expire_at > now()
                                                AND s.expire_at <= now() + interval '5 minutes'),
                    'in_60m', count(*) FILTER (WHERE s.expire_at > now()),
                    'capped', count(*) > 10000)
                  FROM soon s),
        'cancels', (SELECT coalesce(jsonb_agg(jsonb_build_object('minute', _ctl_iso(m.minute),
                                                                 'source', m.source, 'n', m.n)
                                              ORDER BY m.minute, m.source), '[]'::jsonb)
                      FROM cancels m),
        'cancels_live_from', (SELECT _ctl_iso(f.minute) FROM live_from f),
        'lateness', (SELECT jsonb_build_object(
                         'n', count(*),
                         'p50_s', percentile_cont(0.5) WITHIN GROUP (ORDER BY l.s),
                         'p99_s', percentile_cont(0.99) WITHIN GROUP (ORDER BY l.s))
                       FROM late l),
        'exceptions', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', x.kind, 'age', v.age,
                                                                    'n', v.n)
                                                 ORDER BY x.kind, v.age), '[]'::jsonb)
                         FROM exc x,
                              LATERAL (VALUES ('lt_1h', x.lt_1h), ('lt_1d', x.lt_1d),
                                              ('older', x.older)) v(age, n)
                        WHERE v.n > 0),
        'refunds', (SELECT jsonb_build_object('requested', coalesce(sum(x.requested), 0),
                                              'unconfirmed', coalesce(sum(x.unconfirmed), 0),
                                              'overdue_reviews', coalesce(sum(x.overdue), 0))
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
                      FROM scanner_runs r ORDER BY r.started_at DESC LIMIT 1),
        'reconcile', (SELECT jsonb_build_object(
                          'run_id', r.run_id, 'result', r.result,
                          'started_at', _ctl_iso(r.started_at),
                          'finished_at', _ctl_iso(r.finished_at),
                          'age_s', extract(epoch FROM now() - r.finished_at),
                          'since', _ctl_iso(r.since),
                          'violated', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                                  'name', v.key, 'n', v.value::text::bigint)
                                                  ORDER BY v.key ~ '^shop:', length(v.key), v.key),
                                              '[]'::jsonb)
                                         FROM jsonb_each(r.violations) v
                                        WHERE v.value::text <> '0'),
                          'repaired', r.repaired, 'detail', r.detail)
                        FROM reconcile_runs r ORDER BY r.run_id DESC LIMIT 1));
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_overview() TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_overview() IS
    'The console overview: pending and due orders, cancels, lateness, exceptions, outbox, scanner, reconciliation';
