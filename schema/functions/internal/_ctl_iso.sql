-- Internal: a timestamp as contract text (NULL stays NULL). Not granted to anyone.
CREATE OR REPLACE FUNCTION ordergate._ctl_iso(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
COMMENT ON FUNCTION ordergate._ctl_iso(timestamp with time zone) IS
    'Internal: a timestamp as contract text, UTC to the millisecond';
