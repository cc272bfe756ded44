-- The actor written into status_log for automatic sources: the client's application_name, else
-- the login role (session_user is the caller even inside SECURITY DEFINER functions).
CREATE OR REPLACE FUNCTION ordergate._actor() RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce(nullif(current_setting('application_name', true), ''), session_user::text)
$$;
COMMENT ON FUNCTION ordergate._actor() IS
    'Internal: the actor of automatic transitions: the client''s application_name, else its login role';
