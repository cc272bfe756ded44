-- add_coupon: created | exists.
CREATE OR REPLACE FUNCTION ordergate.add_coupon(p_coupon_id text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_coupon_id IS NULL OR length(p_coupon_id) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('add_coupon: coupon_id must be 1..128 characters');
    END IF;
    INSERT INTO coupons (coupon_id) VALUES (p_coupon_id) ON CONFLICT (coupon_id) DO NOTHING;
    RETURN CASE WHEN FOUND THEN 'created' ELSE 'exists' END;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_coupon(text) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.add_coupon(text) IS
    'Creates a coupon (available): created or exists';
