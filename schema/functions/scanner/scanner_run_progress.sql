-- scanner_run_progress: the run's totals so far (absolute values, so a retried call is harmless)
-- and its keyset checkpoint; renews the run's sweep lease (now + the run's lease, at most
-- _scanner_lease_max(): a run recorded before the bound keeps no longer lease). Returns the
-- row's status: anything but 'running' means another run has taken the lease and declared this
-- one crashed, so the caller has lost the sweep and stops. The lease row is locked first, as
-- scanner_run_start and scanner_run_finish do, so that they never wait on each other in
-- opposite orders.
CREATE OR REPLACE FUNCTION ordergate.scanner_run_progress(p_run_id bigint, p_batches int, p_scanned bigint,
                                               p_cancelled bigint, p_already_cancelled bigint,
                                               p_already_paid bigint, p_not_due bigint,
                                               p_not_found bigint,
                                               p_checkpoint_expire_at timestamptz,
                                               p_checkpoint_order_no text, p_busy bigint,
                                               p_hook_failed bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_status text;
    v_lease  interval;
BEGIN
    PERFORM 1 FROM scanner_lease l FOR UPDATE;
    UPDATE scanner_runs r
       SET batches = coalesce(p_batches, r.batches),
           scanned = coalesce(p_scanned, r.scanned),
           cancelled = coalesce(p_cancelled, r.cancelled),
           already_cancelled = coalesce(p_already_cancelled, r.already_cancelled),
           already_paid = coalesce(p_already_paid, r.already_paid),
           not_due = coalesce(p_not_due, r.not_due),
           not_found = coalesce(p_not_found, r.not_found),
           busy = coalesce(p_busy, r.busy),
           hook_failed = coalesce(p_hook_failed, r.hook_failed),
           checkpoint_expire_at = coalesce(p_checkpoint_expire_at, r.checkpoint_expire_at),
           checkpoint_order_no = coalesce(p_checkpoint_order_no, r.checkpoint_order_no),
           progress_at = clock_timestamp()
     WHERE r.run_id = p_run_id AND r.status = 'running'
    RETURNING r.status, r.lease INTO v_status, v_lease;
    IF FOUND THEN
        -- Still running, so no run took the lease over: it is this run's (again, should it have
        -- been cleared by hand meanwhile).
        UPDATE scanner_lease l
           SET run_id = p_run_id,
               taken_at = CASE WHEN l.run_id IS NOT DISTINCT FROM p_run_id THEN l.taken_at
                               ELSE clock_timestamp() END,
               expires_at = clock_timestamp()
                            + least(coalesce(v_lease, interval '60 seconds'), _scanner_lease_max())
         WHERE l.run_id IS NULL OR l.run_id = p_run_id;
    ELSE
        SELECT r.status INTO v_status FROM scanner_runs r WHERE r.run_id = p_run_id;
    END IF;
    RETURN v_status;  -- NULL: no such run
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_run_progress(bigint,int,bigint,bigint,bigint,bigint,bigint,bigint,timestamptz,text,bigint,bigint) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scanner_run_progress(bigint,integer,bigint,bigint,bigint,bigint,bigint,bigint,timestamp with time zone,text,bigint,bigint) IS
    'Records a scanner run''s totals and checkpoint after a batch, and renews its sweep lease';
