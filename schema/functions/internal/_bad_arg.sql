-- Raises 22023 (invalid_parameter_value) with the message: a bad argument changes nothing.
CREATE OR REPLACE FUNCTION ordergate._bad_arg(p_message text) RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', p_message USING ERRCODE = '22023';
END
$$;
COMMENT ON FUNCTION ordergate._bad_arg(text) IS
    'Internal: raises 22023 with the message (a bad argument changes nothing)';
