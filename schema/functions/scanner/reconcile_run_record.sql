-- reconcile_run_record: records one reconciliation run (ordergate-scanner --reconcile, after its
-- report) in reconcile_runs and returns its run_id. The actor is the caller's application_name,
-- else its login role; finished_at is the database's clock.
--   p_started_at  when the run began (not NULL, not in the future)
--   p_since       the orders it checked (placed since; NULL = every order)
--   p_result      clean, violated or failed
--   p_violations  a JSON object: violations by invariant number ("1".."99") and by shop check
--                 ("shop:NAME", -1 = the check failed), integers >= -1; {} for a failed run
--   p_repaired    exceptions the run created (>= 0)
--   p_detail      why a failed run failed (at most 2000 characters), else NULL
-- Errors: 22023 for any value outside these (nothing is recorded).
CREATE OR REPLACE FUNCTION ordergate.reconcile_run_record(p_started_at timestamptz,
                                                          p_since timestamptz, p_result text,
                                                          p_violations jsonb, p_repaired bigint,
                                                          p_detail text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_started_at IS NULL OR p_started_at > clock_timestamp() + interval '1 minute' THEN
        PERFORM _bad_arg('reconcile_run_record: p_started_at must be a time not in the future');
    END IF;
    IF p_result IS NULL OR p_result NOT IN ('clean', 'violated', 'failed') THEN
        PERFORM _bad_arg('reconcile_run_record: p_result must be clean, violated or failed');
    END IF;
    IF p_violations IS NULL OR jsonb_typeof(p_violations) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(p_violations) e
                   WHERE NOT (e.key ~ '^[0-9]{1,2}$' OR e.key ~ '^shop:.{1,200}$')
                      OR jsonb_typeof(e.value) <> 'number'
                      OR e.value::text !~ '^-?[0-9]{1,18}$' OR e.value::text::bigint < -1) THEN
        PERFORM _bad_arg('reconcile_run_record: p_violations must map invariant numbers and '
                         'shop:NAME to integers >= -1');
    END IF;
    IF p_repaired IS NULL OR p_repaired < 0 THEN
        PERFORM _bad_arg('reconcile_run_record: p_repaired must be >= 0');
    END IF;
    IF length(p_detail) > 2000 THEN
        PERFORM _bad_arg('reconcile_run_record: p_detail must be at most 2000 characters');
    END IF;
    INSERT INTO reconcile_runs (started_at, since, result, violations, repaired, actor, detail)
    VALUES (p_started_at, p_since, p_result, p_violations, p_repaired, _actor(), p_detail)
    RETURNING run_id INTO v_id;
    RETURN v_id;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.reconcile_run_record(timestamptz,timestamptz,text,jsonb,bigint,text) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.reconcile_run_record(timestamp with time zone,timestamp with time zone,text,jsonb,bigint,text) IS
    'Records one reconciliation run (ordergate-scanner --reconcile) and its result';
