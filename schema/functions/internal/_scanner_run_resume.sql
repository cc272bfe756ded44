-- A repeated scanner_run_start (same run token): the run that start recorded, as scanner_run_start
-- returns it. Still 'running': its sweep lease is renewed (taken again if it was cleared by
-- hand), exactly as scanner_run_progress renews it, and the caller resumes the run. Anything
-- else ('skipped', or 'crashed' because its lease ran out and another run took over) is
-- returned as it stands and changes nothing. The runs that start reported crashed are returned
-- again (their report was in the lost reply). Called by scanner_run_start only.
CREATE OR REPLACE FUNCTION ordergate._scanner_run_resume(p_run_id bigint)
RETURNS TABLE (kind text, run_id bigint, status text, started_at timestamptz,
               progress_at timestamptz, batches int, cancelled bigint, checkpoint text, detail text)
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    -- The lease row first, as every scanner_run_* function locks it.
    PERFORM 1 FROM scanner_lease l FOR UPDATE;
    UPDATE scanner_lease l
       SET run_id = p_run_id,
           taken_at = CASE WHEN l.run_id IS NOT DISTINCT FROM p_run_id THEN l.taken_at
                           ELSE clock_timestamp() END,
           expires_at = clock_timestamp()
                        + least(coalesce(r.lease, interval '60 seconds'), _scanner_lease_max())
      FROM scanner_runs r
     WHERE r.run_id = p_run_id AND r.status = 'running'
       AND (l.run_id IS NULL OR l.run_id = p_run_id);

    RETURN QUERY
    SELECT 'run'::text, r.run_id, r.status, r.started_at, r.progress_at, r.batches, r.cancelled,
           NULL::text, r.detail
      FROM scanner_runs r WHERE r.run_id = p_run_id;

    RETURN QUERY
    SELECT 'crashed'::text, c.run_id, c.status, c.started_at, c.progress_at, c.batches, c.cancelled,
           CASE WHEN c.checkpoint_expire_at IS NULL THEN NULL
                ELSE c.checkpoint_expire_at::text || ' ' || c.checkpoint_order_no END,
           c.detail
      FROM scanner_runs c
     WHERE c.reported_by = p_run_id
     ORDER BY c.run_id;
END
$$;
COMMENT ON FUNCTION ordergate._scanner_run_resume(bigint) IS
    'Internal: a repeated scanner_run_start finds its own run and resumes it';
