-- _default_currency: the setting default_currency (USD when the row is missing): the currency
-- of an order placed without one and of a payment for an unknown order that named none.
CREATE OR REPLACE FUNCTION ordergate._default_currency() RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce((SELECT s.value FROM ordergate.settings s WHERE s.key = 'default_currency'), 'USD')
$$;
COMMENT ON FUNCTION ordergate._default_currency() IS
    'Internal: the setting default_currency, USD when the row is missing';
