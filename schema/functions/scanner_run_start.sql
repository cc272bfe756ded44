-- scanner_run_start: begin a sweep run. Tries the advisory lock (session level: it stays with the
-- caller's session until scanner_run_finish or disconnect).
--   Lock taken:  inserts a 'running' row; marks every other 'running' row 'crashed' (its process
--                is gone: it would hold the lock otherwise). Returns one row kind 'run' (status
--                'running') and one row kind 'crashed' per run it just marked.
--   Lock busy:   inserts a finished 'skipped' row naming the holder; returns it (kind 'run',
--                status 'skipped'). Nothing else changes.
-- p_grace >= 0; p_batch_size 1..10000; p_max_orders, p_max_seconds >= 0 (0 = no cap).
CREATE OR REPLACE FUNCTION ordergate.scanner_run_start(p_grace interval, p_batch_size int, p_max_orders int,
                                            p_max_seconds int, p_host text, p_os_pid int)
RETURNS TABLE (kind text, run_id bigint, status text, started_at timestamptz,
               progress_at timestamptz, batches int, cancelled bigint, checkpoint text, detail text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id     bigint;
    v_holder int;
BEGIN
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        PERFORM _bad_arg('scanner_run_start: p_grace must be a non-negative interval');
    END IF;
    IF p_batch_size IS NULL OR p_batch_size NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('scanner_run_start: p_batch_size must be 1..10000');
    END IF;
    IF p_max_orders IS NULL OR p_max_orders < 0 OR p_max_seconds IS NULL OR p_max_seconds < 0 THEN
        PERFORM _bad_arg('scanner_run_start: p_max_orders and p_max_seconds must be >= 0 (0 = no cap)');
    END IF;

    IF NOT pg_try_advisory_lock(scanner_lock_key()) THEN
        v_holder := _scanner_lock_holder();
        INSERT INTO scanner_runs AS r (status, finished_at, duration_ms, host, os_pid, grace,
                                       batch_size, max_orders, max_seconds, stop_reason, detail)
        VALUES ('skipped', clock_timestamp(), 0, coalesce(p_host, ''), p_os_pid, p_grace,
                p_batch_size, p_max_orders, p_max_seconds, 'lock_held',
                format('another sweep holds the advisory lock (backend pid %s)',
                       coalesce(v_holder::text, 'unknown')))
        RETURNING r.run_id INTO v_id;
        RETURN QUERY
        SELECT 'run'::text, r.run_id, r.status, r.started_at, r.progress_at, r.batches, r.cancelled,
               NULL::text, r.detail
          FROM scanner_runs r WHERE r.run_id = v_id;
        RETURN;
    END IF;

    -- From here on the lock is ours. Session-level advisory locks ignore rollback: should
    -- anything below fail, release it before re-raising, or this session would keep every later
    -- run out until it disconnects.
    BEGIN
        INSERT INTO scanner_runs AS r (status, host, os_pid, grace, batch_size, max_orders, max_seconds)
        VALUES ('running', coalesce(p_host, ''), p_os_pid, p_grace, p_batch_size, p_max_orders,
                p_max_seconds)
        RETURNING r.run_id INTO v_id;

        RETURN QUERY
        SELECT 'run'::text, r.run_id, r.status, r.started_at, r.progress_at, r.batches, r.cancelled,
               NULL::text, NULL::text
          FROM scanner_runs r WHERE r.run_id = v_id;

        RETURN QUERY
        WITH crashed AS (
            UPDATE scanner_runs r
               SET status = 'crashed',
                   finished_at = coalesce(r.progress_at, r.started_at),
                   duration_ms = (extract(epoch FROM coalesce(r.progress_at, r.started_at) - r.started_at) * 1000)::bigint,
                   stop_reason = 'crashed',
                   detail = format('left running by %s pid %s (backend pid %s); found by run %s',
                                   nullif(r.host, ''), r.os_pid, r.backend_pid, v_id),
                   reported_by = v_id
             WHERE r.status = 'running' AND r.run_id <> v_id
            RETURNING r.*
        )
        SELECT 'crashed'::text, c.run_id, c.status, c.started_at, c.progress_at, c.batches, c.cancelled,
               CASE WHEN c.checkpoint_expire_at IS NULL THEN NULL
                    ELSE c.checkpoint_expire_at::text || ' ' || c.checkpoint_order_no END,
               c.detail
          FROM crashed c
         ORDER BY c.run_id;
    EXCEPTION WHEN OTHERS THEN
        PERFORM pg_advisory_unlock(scanner_lock_key());
        RAISE;
    END;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_run_start(interval,int,int,int,text,int) TO ordergate_service;
