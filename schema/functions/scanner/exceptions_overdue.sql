-- exceptions_overdue: the follow-ups that are late, for alerts (exported by --reconcile):
-- auto-refunds not confirmed by record_refund within refund_confirm_seconds of the payment, and
-- exceptions in manual review older than manual_review_max_age_seconds. An open exception that
-- is neither is on time and alerts nobody.
CREATE OR REPLACE FUNCTION ordergate.exceptions_overdue()
RETURNS TABLE (refunds_unconfirmed bigint, reviews_overdue bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT count(*) FILTER (WHERE e.resolution = 'auto_refund'
                              AND e.created_at < now() - make_interval(secs => _setting_bigint('refund_confirm_seconds', 86400))),
           count(*) FILTER (WHERE e.resolution = 'manual_review'
                              AND e.created_at < now() - make_interval(secs => _setting_bigint('manual_review_max_age_seconds', 259200)))
      FROM ordergate.exceptions e
     WHERE e.state = 'open'
$$;

GRANT EXECUTE ON FUNCTION ordergate.exceptions_overdue() TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.exceptions_overdue() IS
    'Late follow-ups for alerts: unconfirmed auto-refunds, manual reviews waiting too long';
