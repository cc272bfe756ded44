-- Integer setting with a fallback when the row is missing.
CREATE OR REPLACE FUNCTION ordergate._setting_bigint(p_key text, p_default bigint) RETURNS bigint
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce((SELECT s.value::bigint FROM ordergate.settings s WHERE s.key = p_key), p_default)
$$;
COMMENT ON FUNCTION ordergate._setting_bigint(text,bigint) IS
    'Internal: an integer setting, with a fallback when the row is missing';
