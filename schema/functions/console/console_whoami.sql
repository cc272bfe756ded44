-- console_whoami: who the login is and what it may do, so that the console shows only the
-- actions the database will allow (it never decides on its own: a refused call is refused by
-- the database, whatever a page shows). may: one boolean per console action, read from the
-- login's EXECUTE privileges.
CREATE OR REPLACE FUNCTION ordergate.console_whoami() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT jsonb_build_object(
        'login', session_user::text,
        'may', jsonb_build_object(
            'read', has_function_privilege(session_user, 'ordergate.console_overview()', 'EXECUTE'),
            'resolve', has_function_privilege(session_user,
                                              'ordergate.console_resolve(bigint[],text)', 'EXECUTE'),
            'refund', has_function_privilege(session_user,
                                             'ordergate.console_refund(bigint,text,text)', 'EXECUTE'),
            'close', has_function_privilege(session_user, 'ordergate.console_close(text,text)',
                                            'EXECUTE'),
            'settings', has_function_privilege(session_user, 'ordergate.console_settings()',
                                               'EXECUTE'),
            'set_setting', has_function_privilege(session_user,
                                                  'ordergate.console_set_setting(text,text)',
                                                  'EXECUTE')));
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_whoami() TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_whoami() IS
    'The console login and the console actions its roles may execute';
