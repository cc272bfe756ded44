-- _refund_limit: the largest amount, in minor units of p_currency, that is refunded without a
-- person looking (auto_refund; above it: manual_review). The setting auto_refund_limit.<CODE>
-- when there is one; else, for the default currency, auto_refund_limit_cents (5000 when
-- missing: its meaning before currencies existed); else 0, every refund reviewed. Every
-- exception that asks for a refund decides with this (claim_payment, the cancel chain).
CREATE OR REPLACE FUNCTION ordergate._refund_limit(p_currency text) RETURNS bigint
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce((SELECT s.value::bigint FROM ordergate.settings s
                      WHERE s.key = 'auto_refund_limit.' || p_currency),
                    CASE WHEN p_currency = _default_currency()
                         THEN _setting_bigint('auto_refund_limit_cents', 5000) ELSE 0 END)
$$;
COMMENT ON FUNCTION ordergate._refund_limit(text) IS
    'Internal: the auto-refund limit of a currency, in its minor units';
