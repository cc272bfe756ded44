-- _console_cancels: the cancels of each minute in [p_from, p_to) by source (consumer, scanner,
-- manual), one row per minute, zeros included. One short range of orders_closed_at_idx per
-- minute (the index archive() keeps anyway), each cancel's source from its status_log row
-- (primary key), counted without sorting: the cost is one order and one log lookup per cancel,
-- which is why the overview reads finished minutes from console_cancel_minutes instead.
-- jit = off: the planner's estimate of each range grows with the table, not with what it reads,
-- and past jit_above_cost a call spent its time compiling (docs/results/2026-12-07-console.md).
-- Not granted to anyone.
CREATE OR REPLACE FUNCTION ordergate._console_cancels(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (minute timestamptz, consumer integer, scanner integer, manual integer)
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp SET jit = off AS $$
    SELECT m.minute, c.consumer::integer, c.scanner::integer, c.manual::integer
      FROM generate_series(p_from, p_to - interval '1 minute', interval '1 minute') m(minute),
           LATERAL (SELECT count(*) FILTER (WHERE s.source = 'timeout_consumer') AS consumer,
                           count(*) FILTER (WHERE s.source = 'timeout_scanner') AS scanner,
                           count(*) FILTER (WHERE s.source NOT IN ('timeout_consumer',
                                                                   'timeout_scanner')) AS manual
                      FROM orders o
                      JOIN status_log s ON s.order_no = o.order_no
                                       AND s.from_status = 'pending_payment'
                     WHERE o.status <> 'pending_payment' AND o.status = 'cancelled'
                       AND o.closed_at >= m.minute
                       AND o.closed_at < m.minute + interval '1 minute') c;
$$;
COMMENT ON FUNCTION ordergate._console_cancels(timestamp with time zone, timestamp with time zone) IS
    'Internal: cancels per minute by source, counted from orders and status_log';
