-- scanner_run_finish: the final counters, checkpoint and status ('done' or 'failed') with the
-- reason and detail, the duration; then releases the sweep lease if this run holds it. A run
-- already marked 'crashed' (its lease expired and another run took over) still gets its real
-- ending recorded. Then counts the finished minutes' cancels for the console's overview
-- (_console_cancels_rollup: once a sweep, never on the claim path); a failure there, the
-- statement timeout included, is a warning and leaves the run's ending as recorded (the overview
-- then counts those minutes itself).
-- Returns the row's status and duration afterwards (no row: no such run).
CREATE OR REPLACE FUNCTION ordergate.scanner_run_finish(p_run_id bigint, p_status text, p_stop_reason text,
                                             p_detail text, p_batches int, p_scanned bigint,
                                             p_cancelled bigint, p_already_cancelled bigint,
                                             p_already_paid bigint, p_not_due bigint,
                                             p_not_found bigint,
                                             p_checkpoint_expire_at timestamptz,
                                             p_checkpoint_order_no text, p_busy bigint,
                                               p_hook_failed bigint)
RETURNS TABLE (status text, duration_ms bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_status IS NULL OR p_status NOT IN ('done', 'failed') THEN
        PERFORM _bad_arg('scanner_run_finish: p_status must be done or failed');
    END IF;
    PERFORM 1 FROM scanner_lease l FOR UPDATE;
    UPDATE scanner_runs r
       SET status = p_status,
           finished_at = clock_timestamp(),
           duration_ms = (extract(epoch FROM clock_timestamp() - r.started_at) * 1000)::bigint,
           batches = coalesce(p_batches, r.batches),
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
           progress_at = clock_timestamp(),
           stop_reason = p_stop_reason,
           detail = CASE WHEN r.status = 'crashed'
                         THEN concat_ws('; ', p_detail, r.detail)
                         ELSE p_detail END
     WHERE r.run_id = p_run_id AND r.status IN ('running', 'crashed');

    UPDATE scanner_lease l
       SET run_id = NULL, taken_at = NULL, expires_at = NULL
     WHERE l.run_id = p_run_id;

    BEGIN
        PERFORM _console_cancels_rollup();
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        RAISE WARNING 'scanner_run_finish: the console''s cancel counts not updated: %', SQLERRM;
    END;

    RETURN QUERY SELECT r.status, r.duration_ms FROM scanner_runs r WHERE r.run_id = p_run_id;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_run_finish(bigint,text,text,text,int,bigint,bigint,bigint,bigint,bigint,bigint,timestamptz,text,bigint,bigint) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scanner_run_finish(bigint,text,text,text,integer,bigint,bigint,bigint,bigint,bigint,bigint,timestamp with time zone,text,bigint,bigint) IS
    'Ends a scanner run with its final counters and status, and releases the sweep lease';
