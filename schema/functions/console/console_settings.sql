-- console_settings: the gate's settings (the settings table) and its registered hooks, for the
-- console's admin page.
CREATE OR REPLACE FUNCTION ordergate.console_settings() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT jsonb_build_object(
        'settings', (SELECT coalesce(jsonb_agg(jsonb_build_object('key', s.key, 'value', s.value)
                                               ORDER BY s.key), '[]'::jsonb)
                       FROM settings s),
        'hooks', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                             'id', h.id, 'event', h.event, 'fn_name', h.fn_name,
                             'created_at', _ctl_iso(h.created_at), 'created_by', h.created_by)
                             ORDER BY h.event, h.id), '[]'::jsonb)
                    FROM hooks h));
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_settings() TO ordergate_console_admin;
COMMENT ON FUNCTION ordergate.console_settings() IS
    'The gate''s settings and registered hooks, for the console''s admin page';
