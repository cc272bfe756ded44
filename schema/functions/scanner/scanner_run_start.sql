-- scanner_run_start: begin a sweep run. The run lock is the sweep lease (scanner_lease): a row
-- with an expiry, renewed by scanner_run_progress after every batch and released by
-- scanner_run_finish, so it depends on no database session (a transaction pooler may hand each
-- of the run's transactions to another server connection).
--   Lease free or expired: inserts a 'running' row and takes the lease until now + p_lease;
--                marks every other 'running' row 'crashed' (its lease expired: the process is
--                gone or stalled past it). Returns one row kind 'run' (status 'running') and one
--                row kind 'crashed' per run it just marked.
--   Lease held by a run whose lease has not expired, or the advisory key (scanner_lock_key)
--   held by a session (an operator pausing sweeps): inserts a finished 'skipped' row naming the
--                holder; returns it (kind 'run', status 'skipped'). Nothing else changes.
--                Only a session whose login role is a member of ordergate_trigger or
--                ordergate_admin (or a superuser) pauses sweeps with the key: pg_advisory_lock
--                needs no privilege, and an order service holding it would otherwise keep
--                every run skipped.
-- The advisory key is tried for this transaction only (it also keeps two starts apart): nothing
-- is left in the session.
-- The run token: p_token, drawn at random by the scanner for each run (NULL: none, as a scanner
-- of the previous release calls it), is stored with the run. A call whose token names a run
-- already recorded is a repeat of that start (its reply was lost, and the caller sent it
-- again): it changes nothing but the lease's expiry and returns the recorded run as it stands,
-- 'running' (the caller resumes it; the lease is renewed as scanner_run_progress does) or
-- whatever it became ('skipped' when the first call was skipped; 'crashed' when its lease ran
-- out meanwhile and another run took over), with the runs that start reported crashed. Without
-- it, the repeat found the lease held by its own first call and was skipped, and that orphaned
-- run held the lease for p_lease with nobody sweeping.
-- p_grace >= 0; p_batch_size 1..10000; p_max_orders, p_max_seconds >= 0 (0 = no cap);
-- p_lease > 0 and at most _scanner_lease_max() (70 minutes): a longer lease would keep every
-- other run skipped for as long; p_token NULL or 16..64 characters [A-Za-z0-9_-].
CREATE OR REPLACE FUNCTION ordergate.scanner_run_start(p_grace interval, p_batch_size int, p_max_orders int,
                                            p_max_seconds int, p_host text, p_os_pid int,
                                            p_lease interval, p_token text DEFAULT NULL)
RETURNS TABLE (kind text, run_id bigint, status text, started_at timestamptz,
               progress_at timestamptz, batches int, cancelled bigint, checkpoint text, detail text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id     bigint;
    v_holder int;
    v_holder_role oid;
    v_lease  scanner_lease%ROWTYPE;
    v_detail text;
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
    IF p_lease IS NULL OR p_lease <= interval '0' OR p_lease > _scanner_lease_max() THEN
        PERFORM _bad_arg(format('scanner_run_start: p_lease must be a positive interval of at most %s',
                                _scanner_lease_max()));
    END IF;
    IF p_token IS NOT NULL AND NOT (length(p_token) BETWEEN 16 AND 64 AND p_token ~ '^[A-Za-z0-9_-]+$') THEN
        PERFORM _bad_arg('scanner_run_start: p_token must be NULL or 16..64 characters [A-Za-z0-9_-]');
    END IF;

    -- A repeat of a start that committed: resume that run (no lock is taken before this
    -- lookup; a first call still in flight is met by the inserts' ON CONFLICT below).
    IF p_token IS NOT NULL THEN
        SELECT r.run_id INTO v_id FROM scanner_runs r WHERE r.run_token = p_token;
        IF FOUND THEN
            RETURN QUERY SELECT * FROM _scanner_run_resume(v_id);
            RETURN;
        END IF;
    END IF;

    IF NOT pg_try_advisory_xact_lock(scanner_lock_key()) THEN
        v_holder := _scanner_lock_holder();
        SELECT a.usesysid INTO v_holder_role FROM pg_catalog.pg_stat_activity a WHERE a.pid = v_holder;
        -- Taking the key needs no privilege: only a session whose role may run or administer
        -- the sweep pauses it. Another's key is passed over, and the lease row's lock below
        -- keeps this start apart from any other.
        IF v_holder_role IS NULL OR pg_has_role(v_holder_role, 'ordergate_trigger', 'MEMBER')
           OR pg_has_role(v_holder_role, 'ordergate_admin', 'MEMBER') THEN
            v_detail := format('a session holds the sweep lock (backend pid %s)',
                               coalesce(v_holder::text, 'unknown'));
        END IF;
    END IF;
    IF v_detail IS NULL THEN
        SELECT * INTO v_lease FROM scanner_lease l FOR UPDATE;
        IF v_lease.run_id IS NOT NULL AND v_lease.expires_at > clock_timestamp() THEN
            SELECT format('run %s (%s pid %s) holds the sweep lease until %s', r.run_id,
                          coalesce(nullif(r.host, ''), 'unknown host'), r.os_pid, v_lease.expires_at)
              INTO v_detail
              FROM scanner_runs r WHERE r.run_id = v_lease.run_id;
            v_detail := coalesce(v_detail, format('run %s holds the sweep lease until %s',
                                                  v_lease.run_id, v_lease.expires_at));
        END IF;
    END IF;

    IF v_detail IS NOT NULL THEN
        INSERT INTO scanner_runs AS r (status, finished_at, duration_ms, host, os_pid, grace,
                                       batch_size, max_orders, max_seconds, stop_reason, detail,
                                       lease, run_token)
        VALUES ('skipped', clock_timestamp(), 0, coalesce(p_host, ''), p_os_pid, p_grace,
                p_batch_size, p_max_orders, p_max_seconds, 'lock_held', v_detail, p_lease, p_token)
        ON CONFLICT (run_token) WHERE run_token IS NOT NULL DO NOTHING
        RETURNING r.run_id INTO v_id;
        IF v_id IS NULL THEN
            -- The first call with this token committed while this one ran (it held the lock
            -- that made this one skip): this call is its repeat.
            SELECT r.run_id INTO v_id FROM scanner_runs r WHERE r.run_token = p_token;
            RETURN QUERY SELECT * FROM _scanner_run_resume(v_id);
            RETURN;
        END IF;
        RETURN QUERY
        SELECT 'run'::text, r.run_id, r.status, r.started_at, r.progress_at, r.batches, r.cancelled,
               NULL::text, r.detail
          FROM scanner_runs r WHERE r.run_id = v_id;
        RETURN;
    END IF;

    INSERT INTO scanner_runs AS r (status, host, os_pid, grace, batch_size, max_orders, max_seconds,
                                   lease, run_token)
    VALUES ('running', coalesce(p_host, ''), p_os_pid, p_grace, p_batch_size, p_max_orders,
            p_max_seconds, p_lease, p_token)
    ON CONFLICT (run_token) WHERE run_token IS NOT NULL DO NOTHING
    RETURNING r.run_id INTO v_id;
    IF v_id IS NULL THEN
        -- The first call with this token was skipped and committed while this one ran.
        SELECT r.run_id INTO v_id FROM scanner_runs r WHERE r.run_token = p_token;
        RETURN QUERY SELECT * FROM _scanner_run_resume(v_id);
        RETURN;
    END IF;
    UPDATE scanner_lease l
       SET run_id = v_id, taken_at = clock_timestamp(), expires_at = clock_timestamp() + p_lease;

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
               detail = format('left running by %s pid %s (backend pid %s); %s; found by run %s',
                               nullif(r.host, ''), r.os_pid, r.backend_pid,
                               CASE WHEN r.run_id = v_lease.run_id
                                    THEN format('its sweep lease expired at %s', v_lease.expires_at)
                                    ELSE 'it held no sweep lease' END,
                               v_id),
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
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_run_start(interval,int,int,int,text,int,interval,text) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scanner_run_start(interval,integer,integer,integer,text,integer,interval,text) IS
    'Begins a scanner run: takes the sweep lease or records the run skipped; a repeated token resumes it';
