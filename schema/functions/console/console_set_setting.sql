-- console_set_setting: changes one setting through set_setting (its keys and values) and
-- audits it with the old and new values. Granted to ordergate_admin only: reading settings in
-- the console is ordergate_console_admin's, changing them stays with whoever may call
-- set_setting. Returns the previous value.
CREATE OR REPLACE FUNCTION ordergate.console_set_setting(p_key text, p_value text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_old text;
BEGIN
    v_old := set_setting(p_key, p_value);
    PERFORM _console_audit('set_setting', p_key, 'set',
                           jsonb_build_object('old', v_old, 'new', p_value));
    RETURN v_old;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_set_setting(text,text) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.console_set_setting(text,text) IS
    'Changes a setting from the console (ordergate_admin only), audited';
