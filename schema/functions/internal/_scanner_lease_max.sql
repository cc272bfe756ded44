-- The longest sweep lease a run may hold: 70 minutes, the most the scanner's configuration can
-- ask for (scanner.lease_s at most 3600 s plus scanner.pause_ms at most 600 s). scanner_run_start
-- refuses a longer p_lease (22023) and scanner_run_progress never renews past it, so no caller
-- of the scanner functions can keep every sweep skipped for longer than that.
CREATE OR REPLACE FUNCTION ordergate._scanner_lease_max() RETURNS interval
LANGUAGE sql IMMUTABLE SET search_path = ordergate, pg_temp AS $$
    SELECT interval '70 minutes'
$$;
COMMENT ON FUNCTION ordergate._scanner_lease_max() IS
    'Internal: the longest sweep lease a run may hold';
