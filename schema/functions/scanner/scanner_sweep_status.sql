-- scanner_sweep_status: when orders were last swept, for the scanner's skip alarm
-- (docs/scanner.md, "Skipped runs and --max-skip"). Any session may hold the sweep lock's
-- advisory key (pg_advisory_lock needs no privilege), and a run holds the sweep lease while it
-- sweeps: a run that finds either held is skipped, and only the age of the last real sweep
-- tells a long sweep from a sweep that is not happening at all.
--   last_sweep_at       the newest sign of sweeping: the end of the newest 'done' run, or the
--                       last progress (else the start) of the 'running' run whose lease has not
--                       expired (a long sweep is sweeping); NULL when none
--   age_s               seconds from last_sweep_at to now (database clock); when no run ever
--                       swept, from the start of the first recorded run, so a fresh install
--                       alarms only after skipping that long; 0 when there is no run at all
--   holder_pid, holder_role, holder_application
--                       what keeps runs out: the session that holds the advisory key (role and
--                       application as pg_stat_activity shows them to anyone), else the run
--                       whose lease has not expired (the backend pid it started on, no role,
--                       its actor); NULL when neither
-- Reads only. Cheap: the newest 'done' run is found walking scanner_runs_started_idx back over
-- the runs since it (runs never overlap under the lease, so the newest started is the newest
-- finished), the lease's run by its key.
CREATE OR REPLACE FUNCTION ordergate.scanner_sweep_status()
RETURNS TABLE (last_sweep_at timestamptz, age_s double precision, holder_pid int,
               holder_role text, holder_application text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_holder  int := _scanner_lock_holder();
    v_run     scanner_runs%ROWTYPE;
    v_done    timestamptz;
    v_running timestamptz;
    v_first   timestamptz;
    v_last    timestamptz;
BEGIN
    SELECT r.finished_at INTO v_done
      FROM scanner_runs r
     WHERE r.status = 'done'
     ORDER BY r.started_at DESC
     LIMIT 1;
    SELECT r.* INTO v_run
      FROM scanner_lease l JOIN scanner_runs r ON r.run_id = l.run_id
     WHERE l.expires_at > clock_timestamp() AND r.status = 'running';
    v_running := coalesce(v_run.progress_at, v_run.started_at);
    v_last := greatest(v_done, v_running);   -- greatest ignores NULLs
    IF v_last IS NULL THEN
        SELECT min(r.started_at) INTO v_first FROM scanner_runs r;
    END IF;

    IF v_holder IS NULL AND v_run.run_id IS NOT NULL THEN
        RETURN QUERY
        SELECT v_last,
               coalesce(greatest(extract(epoch FROM clock_timestamp() - coalesce(v_last, v_first)), 0)::float8, 0),
               v_run.backend_pid, NULL::text, v_run.actor;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT v_last,
           coalesce(greatest(extract(epoch FROM clock_timestamp() - coalesce(v_last, v_first)), 0)::float8, 0),
           v_holder, a.usename::text, a.application_name
      FROM (SELECT 1) one
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = v_holder;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_sweep_status() TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scanner_sweep_status() IS
    'When orders were last swept and who holds the sweep lock, for the skip alarm';
