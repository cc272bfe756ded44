-- set_setting: only known keys, only valid values. Returns the previous value.
-- Keys (schema/README.md, "Tables", settings), non-negative integers: auto_refund_limit_cents
-- (the default currency's), auto_refund_limit.<CODE> (the limit of currency CODE, a code in
-- currencies, in its minor units), max_hold_seconds (>= 1), schedule_cancels (0 or 1),
-- refund_confirm_seconds, manual_review_max_age_seconds, max_deadline_seconds
-- (1..3153600000: at most 100 years, well inside the years 0..9999 a cancel message carries),
-- max_pending_charge_seconds (1..2592000: a charge protects its order 30 days at most).
-- default_currency: a code in currencies; orders and payments named without a currency take it
-- from then on (placed orders keep theirs), and auto_refund_limit_cents applies to it.
-- reminder_before_seconds: '' (no reminders) or up to 8 distinct offsets in seconds, each
-- 1..31622400, comma-separated ('300,60'); orders placed from then on get a reminder per offset.
CREATE OR REPLACE FUNCTION ordergate.set_setting(p_key text, p_value text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_old text;
BEGIN
    IF p_key IS NULL
       OR (p_key NOT IN ('auto_refund_limit_cents', 'max_hold_seconds', 'schedule_cancels',
                         'refund_confirm_seconds', 'manual_review_max_age_seconds',
                         'max_deadline_seconds', 'max_pending_charge_seconds', 'default_currency',
                         'reminder_before_seconds')
           AND NOT (p_key ~ '^auto_refund_limit\.[A-Z]{3}$'
                    AND EXISTS (SELECT 1 FROM currencies c WHERE c.code = substr(p_key, 19)))) THEN
        PERFORM _bad_arg('set_setting: key must be auto_refund_limit_cents, auto_refund_limit.<CODE> '
                         '(a code in currencies), max_hold_seconds, schedule_cancels, '
                         'refund_confirm_seconds, manual_review_max_age_seconds, max_deadline_seconds, '
                         'max_pending_charge_seconds, default_currency or reminder_before_seconds');
    END IF;
    IF p_key = 'default_currency' THEN
        IF p_value IS NULL OR NOT EXISTS (SELECT 1 FROM currencies c WHERE c.code = p_value) THEN
            PERFORM _bad_arg(format('set_setting: default_currency must be a code in currencies, not %s',
                                    coalesce(p_value, 'NULL')));
        END IF;
    ELSIF p_key = 'reminder_before_seconds' THEN
        -- Refused whole: a list that place_order would read differently from what was meant
        -- (a blank, a unit, a zero, a repeat) never gets in.
        IF p_value IS NULL OR p_value !~ '^([0-9]{1,8}(,[0-9]{1,8}){0,7})?$'
           OR EXISTS (SELECT 1 FROM unnest(string_to_array(p_value, ',')) x
                       WHERE x::bigint NOT BETWEEN 1 AND 31622400)
           OR (SELECT count(*) <> count(DISTINCT x::int) FROM unnest(string_to_array(p_value, ',')) x) THEN
            PERFORM _bad_arg(format('set_setting: reminder_before_seconds must be empty (none) or up to 8 '
                                    'distinct offsets in seconds, each 1..31622400, comma-separated '
                                    'without blanks (e.g. 300,60), not %s', coalesce(p_value, 'NULL')));
        END IF;
    ELSIF p_value IS NULL OR p_value !~ '^[0-9]{1,15}$'
       OR (p_key = 'max_hold_seconds' AND p_value::bigint NOT BETWEEN 1 AND 2147483647)
       OR (p_key = 'schedule_cancels' AND p_value NOT IN ('0', '1'))
       OR (p_key = 'max_deadline_seconds' AND p_value::bigint NOT BETWEEN 1 AND 3153600000)
       OR (p_key = 'max_pending_charge_seconds' AND p_value::bigint NOT BETWEEN 1 AND 2592000) THEN
        PERFORM _bad_arg('set_setting: value must be a non-negative integer (max_hold_seconds >= 1, '
                         'schedule_cancels 0 or 1, max_deadline_seconds 1..3153600000, '
                         'max_pending_charge_seconds 1..2592000)');
    END IF;
    SELECT s.value INTO v_old FROM settings s WHERE s.key = p_key FOR UPDATE;
    INSERT INTO settings AS s (key, value) VALUES (p_key, p_value)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    RETURN v_old;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.set_setting(text,text) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.set_setting(text,text) IS
    'Changes a known setting to a valid value; returns the previous value';
