-- reconcile: the invariants of schema/README.md ("The invariants reconcile() checks"),
-- then the shop's own checks (add_check, "Shop checks": rows with invariant NULL, named
-- shop:<name>, violations -1 when the check failed); reconcile_repair creates what can be
-- created safely.
--
-- STABLE: all the checks read one snapshot, so a claim committing meanwhile is seen whole or
-- not at all (every claim writes all its rows in one transaction). Each check is one set-based
-- query (hash joins / aggregates, no per-row loops): seconds on 1,000,000 orders.
--
-- p_since limits the order-scoped checks (1, 4, 7, 10, 11, 12, 14, 15, 16, 17, 18: orders created at or after it; 6: orders whose
-- deadline expire_at is at or after it; 5: payments and refused-payment exceptions created at or
-- after it; 8: exceptions created at or after it; 13: payments and exceptions created at or after it),
-- e.g. to one drill's orders. Invariants 2 (stock per SKU), 3 (coupon per coupon) and 9
-- (quarantined events) are global state and always checked whole. Both 2 and 3 count what
-- ordergate.archive() moved out: invariant 2
-- adds inventory.archived_qty (the qty of archived paid orders), invariant 3 counts archived
-- paid orders as the live orders of their coupons. The other checks read what remains, which
-- archive() keeps whole: an order moves with all its rows, or not at all.
CREATE OR REPLACE FUNCTION ordergate.reconcile(p_since timestamptz DEFAULT '-infinity',
                                    p_grace interval DEFAULT '0 seconds',
                                    p_scan_interval interval DEFAULT '5 minutes')
RETURNS TABLE (invariant int, name text, violations bigint, sample text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
-- Whole-table joins and aggregates: memory to keep them off disk, and the cost of an index probe
-- as it is when the books are cached (favours merge joins along the order_no indexes).
SET search_path = ordergate, pg_temp
SET work_mem = '64MB'
SET random_page_cost = 1.1
AS $$
#variable_conflict use_column
DECLARE
    v_since timestamptz := coalesce(p_since, '-infinity');
    v_grace interval    := coalesce(p_grace, '0 seconds');
    v_scan  interval    := coalesce(p_scan_interval, '5 minutes');
    v_n1    bigint;
    v_s1    text[];
    v_n4    bigint;
    v_s4    text[];
BEGIN
    -- 1 and 4 in one pass over orders FULL JOIN status_log's moves out of anything but released
    -- (one per order: the log's key is the order number and from_status), with the order's move
    -- out of released beside it (a released order later paid; migration 017).
    -- 1. Status moves only pending_payment -> paid | cancelled | released, and released -> paid,
    --    once each: a logged move is from pending_payment to paid, cancelled or released and ends
    --    in the order's current status (or in released, then paid by its logged move out of
    --    released; a pending order with a logged move went back); no log row for a missing
    --    order.
    -- 4. Exactly one status_log row per transition, none for a pending order; the source fits the
    --    move (payment_callback or manual_payment for paid; a timeout source or manual for
    --    cancelled; manual for released); the key is the txn_no that paid this order (its 'paid'
    --    or 'overpaid' payment) or the order number; an actor.
    WITH a AS (
        SELECT coalesce(o.order_no, l.order_no) AS order_no,
               (l.order_no IS NOT NULL
                AND (o.order_no IS NULL
                     OR l.from_status <> 'pending_payment'
                     OR l.to_status NOT IN ('paid', 'cancelled', 'released')
                     OR (l.to_status IS DISTINCT FROM o.status
                         AND NOT (l.to_status = 'released' AND o.status = 'paid'
                                  AND r.order_no IS NOT NULL))))
               OR (r.order_no IS NOT NULL
                   AND (l.to_status IS DISTINCT FROM 'released' OR r.to_status <> 'paid'
                        OR o.status <> 'paid')) AS bad1,
               o.order_no IS NOT NULL
               AND ((o.status <> 'pending_payment') IS DISTINCT FROM (l.order_no IS NOT NULL)
                    OR (l.order_no IS NOT NULL
                        AND (coalesce(l.actor, '') = ''
                             OR (l.to_status = 'paid'
                                 AND (l.source NOT IN ('payment_callback', 'manual_payment')
                                      OR p.txn_no IS DISTINCT FROM l.idempotency_key))
                             OR (l.to_status = 'cancelled'
                                 AND (l.source NOT IN ('timeout_consumer', 'timeout_scanner', 'manual')
                                      OR l.idempotency_key <> o.order_no))
                             OR (l.to_status = 'released'
                                 AND (l.source <> 'manual' OR l.idempotency_key <> o.order_no))))
                    OR (r.order_no IS NOT NULL
                        AND (coalesce(r.actor, '') = ''
                             OR r.source NOT IN ('payment_callback', 'manual_payment')
                             OR p.txn_no IS DISTINCT FROM r.idempotency_key))
                    OR (o.status = 'paid' AND l.to_status = 'released' AND r.order_no IS NULL)) AS bad4
          FROM orders o
          -- the order's one paid (or overpaid) payment (unique index payments_one_paid_per_order_uq)
          LEFT JOIN payments p ON p.order_no = o.order_no AND p.outcome IN ('paid', 'overpaid')
          FULL JOIN (SELECT x.* FROM status_log x WHERE x.from_status <> 'released') l
                 ON l.order_no = o.order_no
          LEFT JOIN status_log r ON r.order_no = o.order_no AND r.from_status = 'released'
         WHERE o.order_no IS NULL OR o.created_at >= v_since
    )
    SELECT count(*) FILTER (WHERE a.bad1),
           (array_agg(a.order_no ORDER BY a.order_no) FILTER (WHERE a.bad1))[1:10],
           count(*) FILTER (WHERE a.bad4),
           (array_agg(a.order_no ORDER BY a.order_no) FILTER (WHERE a.bad4))[1:10]
      INTO v_n1, v_s1, v_n4, v_s4
      FROM a;
    RETURN QUERY SELECT 1, 'status moves only pending_payment -> paid|cancelled|released, released -> paid, once'::text, v_n1, v_s1;

    -- 2. Per SKU: total (initial stock + additions) = available + qty held by pending, paid and
    --    released orders + qty of archived paid and released orders.
    RETURN QUERY
    WITH held AS (
        SELECT it.sku, sum(it.qty)::bigint AS q
          FROM order_items it
          JOIN orders o ON o.order_no = it.order_no
         WHERE o.status IN ('pending_payment', 'paid', 'released')
         GROUP BY it.sku
    ), bad AS (
        SELECT i.sku
          FROM inventory i
          LEFT JOIN held h ON h.sku = i.sku
         WHERE i.total <> i.available + coalesce(h.q, 0) + i.archived_qty
    )
    SELECT 2, 'per sku: initial stock = available + qty of pending, paid and released orders'::text,
           count(*), (array_agg(bad.sku ORDER BY bad.sku))[1:10]
      FROM bad;

    -- 3. Coupon state matches its live order: pending -> locked, paid or released -> used, none
    --    (only cancelled orders or none) -> available; and no coupon backs two live orders.
    RETURN QUERY
    WITH live AS (
        SELECT o.coupon_id, count(*) AS n, min(o.status) AS status
          FROM (SELECT o.coupon_id, o.status
                  FROM orders o
                 WHERE o.coupon_id IS NOT NULL AND o.status <> 'cancelled'
                UNION ALL
                SELECT a.coupon_id, a.status
                  FROM archived_orders a
                 WHERE a.coupon_id IS NOT NULL AND a.status = 'paid'
                UNION ALL
                SELECT a.coupon_id, a.status
                  FROM archived_orders a
                 WHERE a.coupon_id IS NOT NULL AND a.status = 'released') o
         GROUP BY o.coupon_id
    ), bad AS (
        SELECT c.coupon_id
          FROM coupons c
          LEFT JOIN live ON live.coupon_id = c.coupon_id
         WHERE coalesce(live.n, 0) > 1
            OR c.state <> CASE live.status
                              WHEN 'pending_payment' THEN 'locked'
                              WHEN 'paid' THEN 'used'
                              WHEN 'released' THEN 'used'
                              ELSE 'available'
                          END
    )
    SELECT 3, 'coupon state matches order status (pending: locked, paid or released: used, cancelled: available)'::text,
           count(*), (array_agg(bad.coupon_id ORDER BY bad.coupon_id))[1:10]
      FROM bad;

    RETURN QUERY SELECT 4, 'exactly one status_log row per transition, with its source and idempotency key'::text, v_n4, v_s4;

    -- 5. Every payment that needs a follow-up (late_payment: a successful payment on a cancelled
    --    order; also double_payment, amount_mismatch, currency_mismatch, overpaid, not_found, and
    --    a 'paid' payment whose order is not paid) has exactly one exception (late payments: kind
    --    late_payment); nothing left
    --    'processing'. "Exactly one" and "no txn applied twice" also rest on unique indexes:
    --    one exception per txn_no, one 'paid' payment per order, one log row per order.
    --    And no refused payment result waits unreviewed: the consumer dead-lettered it, so the
    --    channel may hold money the payments table never saw (an open 'refused_payment'
    --    exception, named 'refused:<exception id>', until an operator resolves it).
    RETURN QUERY
    WITH bad AS (
        SELECT 'refused:' || x.id AS txn_no
          FROM exceptions x
         WHERE x.kind = 'refused_payment' AND x.state = 'open' AND x.created_at >= v_since
        UNION ALL
        SELECT p.txn_no
          FROM payments p
          LEFT JOIN orders o ON o.order_no = p.order_no AND p.outcome IN ('paid', 'overpaid')
          LEFT JOIN exceptions x ON x.txn_no = p.txn_no
         WHERE p.created_at >= v_since
           AND (p.outcome = 'processing'
                OR (p.outcome IN ('paid', 'overpaid') AND o.status IS DISTINCT FROM 'paid'
                    AND x.txn_no IS NULL)
                OR (p.outcome IN ('late_payment', 'double_payment', 'amount_mismatch', 'not_found',
                                  'currency_mismatch', 'overpaid')
                    AND x.txn_no IS NULL)
                OR (p.outcome = 'late_payment' AND x.kind IS DISTINCT FROM 'late_payment'))
    )
    SELECT 5, 'every successful payment on a cancelled order has exactly one exception; no txn applied twice; no refused payment unreviewed'::text,
           count(*), (array_agg(bad.txn_no ORDER BY bad.txn_no))[1:10]
      FROM bad;

    -- 6. No order stays pending_payment past expire_at + grace + one scanner interval (past its
    --    pending charge's bound, charge_until, when that is later: the charge protects it). Never
    --    windowed: an overdue pending order is a violation however long ago it was placed or
    --    fell due (a payment window of nine days, a stuck order reported every day until it is
    --    fixed). The pending orders' index orders_overdue_idx makes it a range scan over the
    --    overdue pending orders only, which are what it reports.
    RETURN QUERY
    SELECT 6, 'no order pending past expire_at + grace + one scanner interval'::text,
           count(*), (array_agg(o.order_no ORDER BY o.order_no))[1:10]
      FROM orders o
     WHERE o.status = 'pending_payment'
       AND o.expire_at < now() - v_grace - v_scan
       AND (o.charge_until IS NULL OR o.charge_until < now() - v_grace - v_scan);

    -- 7. Exactly one outbox event per winning transition: a paid order has one order_paid event,
    --    a cancelled order one order_cancelled event, a pending order none, and no transition
    --    event names a missing order. "At most one per order" is the unique index
    --    outbox_order_no_uq; this pass finds missing, mismatched and orphaned events.
    RETURN QUERY
    WITH ev AS (
        SELECT b.order_no, b.event_type
          FROM outbox b
         WHERE b.event_type IN ('order_paid', 'order_cancelled')
    ), bad AS (
        SELECT coalesce(o.order_no, ev.order_no) AS order_no
          FROM orders o
          FULL JOIN ev ON ev.order_no = o.order_no
         WHERE o.order_no IS NULL
            OR (o.created_at >= v_since
                AND ev.event_type IS DISTINCT FROM CASE o.status
                                                       WHEN 'paid' THEN 'order_paid'
                                                       WHEN 'cancelled' THEN 'order_cancelled'
                                                   END)
    )
    SELECT 7, 'exactly one outbox event per winning transition'::text,
           count(*), (array_agg(bad.order_no ORDER BY bad.order_no))[1:10]
      FROM bad;

    -- 8. Every requested refund is confirmed in time: no auto-refund still unconfirmed
    --    refund_confirm_seconds after its payment, and the refund results agree with the
    --    exception (state 'refunded' exactly when one refund of it succeeded). Sample: txn_no.
    RETURN QUERY
    WITH ok AS (
        SELECT r.exception_id FROM refunds r WHERE r.outcome = 'succeeded'
    ), bad AS (
        SELECT e.txn_no
          FROM exceptions e
          LEFT JOIN ok ON ok.exception_id = e.id
         WHERE e.created_at >= v_since
           AND ((e.state = 'open' AND e.resolution = 'auto_refund'
                 AND e.created_at < now() - make_interval(secs => _setting_bigint('refund_confirm_seconds', 86400)))
                OR ((e.state = 'refunded') IS DISTINCT FROM (ok.exception_id IS NOT NULL)))
    )
    SELECT 8, 'every requested refund confirmed in time'::text,
           count(*), (array_agg(bad.txn_no ORDER BY bad.txn_no))[1:10]
      FROM bad;

    -- 9. Every event reaches its topic: none set aside by the relay as unpublishable
    --    (outbox_quarantine). Such an event keeps its order out of archive() until an operator
    --    releases it (outbox_release), so it is reported here rather than left to wait silently.
    --    Read from the partial index of quarantined events, whatever p_since. Sample: event id.
    RETURN QUERY
    SELECT 9, 'no outbox event quarantined as unpublishable'::text,
           count(*), (array_agg(b.id::text ORDER BY b.id))[1:10]
      FROM outbox b
     WHERE b.quarantined_at IS NOT NULL;

    -- 10. Captured parts add up: an allow_partial order's captured_cents is the sum of its
    --     captured parts (payments partial, paid or overpaid), each in the order's currency; an
    --     order without parts has 0. Sample: order_no.
    RETURN QUERY
    WITH parts AS (
        SELECT p.order_no, sum(p.amount_cents) AS s,
               bool_or(p.currency IS DISTINCT FROM o.currency) AS other_currency
          FROM payments p
          JOIN orders o ON o.order_no = p.order_no
         WHERE p.outcome IN ('partial', 'paid', 'overpaid') AND o.allow_partial
         GROUP BY p.order_no
    ), bad AS (
        SELECT o.order_no
          FROM orders o
          LEFT JOIN parts ON parts.order_no = o.order_no
         WHERE o.created_at >= v_since
           AND (o.captured_cents <> CASE WHEN o.allow_partial THEN coalesce(parts.s, 0) ELSE 0 END
                OR coalesce(parts.other_currency, false))
    )
    SELECT 10, 'captured_cents = the sum of the order''s captured parts, in its currency'::text,
           count(*), (array_agg(bad.order_no ORDER BY bad.order_no))[1:10]
      FROM bad;

    -- 11. Parts against the amount: a paid allow_partial order's parts reach at least its
    --     amount, an open or cancelled one's stay below it (the part that reaches it pays). And an
    --     overpaid order's excess is what its overpaid exception asks back. Sample: order_no.
    RETURN QUERY
    WITH bad AS (
        SELECT o.order_no
          FROM orders o
          LEFT JOIN payments p ON p.order_no = o.order_no AND p.outcome = 'overpaid'
          LEFT JOIN exceptions x ON x.txn_no = p.txn_no AND x.kind = 'overpaid'
         WHERE o.allow_partial
           AND o.created_at >= v_since
           AND ((o.status = 'paid') <> (o.captured_cents >= o.amount_cents)
                OR (p.txn_no IS NOT NULL
                    AND x.amount_cents IS DISTINCT FROM o.captured_cents - o.amount_cents))
    )
    SELECT 11, 'a paid order''s parts sum to at least its amount, an unpaid one''s below it'::text,
           count(*), (array_agg(bad.order_no ORDER BY bad.order_no))[1:10]
      FROM bad;

    -- 12. Every captured part of a cancelled order has exactly one cancelled_part exception of
    --     its amount and currency (the cancel wrote it; one per txn_no is the unique index), and
    --     no cancelled_part exception names anything else. Sample: txn_no.
    RETURN QUERY
    WITH cp AS (
        SELECT x.txn_no, x.amount_cents, x.currency
          FROM exceptions x
         WHERE x.kind = 'cancelled_part'
    ), pp AS (
        SELECT p.txn_no, p.amount_cents, p.currency, o.status
          FROM payments p
          JOIN orders o ON o.order_no = p.order_no
         WHERE p.outcome = 'partial' AND o.created_at >= v_since
    ), bad AS (
        SELECT coalesce(pp.txn_no, cp.txn_no) AS txn_no
          FROM pp
          FULL JOIN cp ON cp.txn_no = pp.txn_no
         WHERE (pp.txn_no IS NULL AND NOT EXISTS (SELECT 1 FROM payments q
                                                   JOIN orders o ON o.order_no = q.order_no
                                                  WHERE q.txn_no = cp.txn_no
                                                    AND o.created_at < v_since))
            OR (pp.status = 'cancelled'
                AND (cp.txn_no IS NULL OR cp.amount_cents <> pp.amount_cents
                     OR cp.currency IS DISTINCT FROM pp.currency))
            OR (pp.status <> 'cancelled' AND cp.txn_no IS NOT NULL)
    )
    SELECT 12, 'every captured part of a cancelled order has exactly one cancelled_part exception'::text,
           count(*), (array_agg(bad.txn_no ORDER BY bad.txn_no))[1:10]
      FROM bad;

    -- 13. No amount is counted in another currency: a payment is in its order's currency unless
    --     it is the currency_mismatch that refused it (or names no order: not_found), and an
    --     exception of a payment is in that payment's currency. Sample: txn_no.
    RETURN QUERY
    WITH bad AS (
        SELECT p.txn_no
          FROM payments p
          JOIN orders o ON o.order_no = p.order_no
         WHERE p.created_at >= v_since
           AND p.outcome NOT IN ('currency_mismatch', 'not_found', 'processing')
           AND p.currency <> o.currency
        UNION
        SELECT x.txn_no
          FROM exceptions x
          JOIN payments p ON p.txn_no = x.txn_no
         WHERE x.created_at >= v_since
           AND x.currency IS DISTINCT FROM p.currency
    )
    SELECT 13, 'no payment or exception amount counted in another currency'::text,
           count(*), (array_agg(bad.txn_no ORDER BY bad.txn_no))[1:10]
      FROM bad;

    -- 14. No order cancelled by a timeout while a charge of it was pending within its bound: a
    --     charge still pending at the cancel (still pending now, or ended after its order
    --     closed: ended_late) whose bound was after the cancel's time. The cancel claim refuses
    --     exactly that (charge_until > now()), so any row here is a cancel that ignored a charge.
    --     Driven by the charges (few), each order and its log row by primary key. Sample: the
    --     order number.
    RETURN QUERY
    SELECT 14, 'no order cancelled by a timeout while a charge was pending within its bound'::text,
           count(DISTINCT o.order_no), (array_agg(DISTINCT o.order_no))[1:10]
      FROM charges c
      JOIN orders o ON o.order_no = c.order_no
      JOIN status_log l ON l.order_no = o.order_no
     WHERE o.status = 'cancelled'
       AND o.created_at >= v_since
       AND l.source IN ('timeout_consumer', 'timeout_scanner')
       AND (c.state = 'pending' OR c.ended_late)
       AND c.bound_at > o.closed_at;

    -- 15. A released order stays released or is paid, never cancelled nor pending again: every
    --     order whose log has a move to released is released or paid now, has no order_cancelled
    --     event and one order_released event, and its coupon is used (its stock is counted in
    --     2). An order_released event names an order whose log has the move. Sample: order_no.
    RETURN QUERY
    WITH rel AS (
        SELECT l.order_no FROM status_log l WHERE l.to_status = 'released'
    ), ev AS (
        SELECT b.order_no, count(*) FILTER (WHERE b.event_type = 'order_released') AS nrel,
               count(*) FILTER (WHERE b.event_type = 'order_cancelled') AS ncan
          FROM outbox b
         WHERE b.event_type IN ('order_released', 'order_cancelled')
         GROUP BY b.order_no
    ), bad AS (
        SELECT coalesce(rel.order_no, o.order_no) AS order_no
          FROM rel
          JOIN orders o ON o.order_no = rel.order_no
          LEFT JOIN ev ON ev.order_no = rel.order_no
          LEFT JOIN coupons c ON c.coupon_id = o.coupon_id
         WHERE o.created_at >= v_since
           AND (o.status NOT IN ('released', 'paid')
                OR coalesce(ev.ncan, 0) > 0
                OR coalesce(ev.nrel, 0) <> 1
                OR (o.coupon_id IS NOT NULL AND c.state IS DISTINCT FROM 'used'))
        UNION
        SELECT o.order_no
          FROM orders o
          JOIN ev ON ev.order_no = o.order_no AND ev.nrel > 0
         WHERE o.created_at >= v_since
           AND NOT EXISTS (SELECT 1 FROM rel WHERE rel.order_no = o.order_no)
    )
    SELECT 15, 'a released order is never cancelled: released or paid, its coupon used, one order_released event'::text,
           count(*), (array_agg(bad.order_no ORDER BY bad.order_no))[1:10]
      FROM bad;

    -- 16. Amendments agree with the order: an amended order's amount and lines are its last
    --     amendment's after, and each amendment's before is the previous one's after (nothing
    --     changed the order between them). Sample: order_no.
    RETURN QUERY
    WITH m AS (
        SELECT a.order_no, a.before, a.after,
               lag(a.after) OVER (PARTITION BY a.order_no ORDER BY a.id) AS prev,
               row_number() OVER (PARTITION BY a.order_no ORDER BY a.id DESC) AS rn
          FROM amendments a
    ), bad AS (
        SELECT DISTINCT m.order_no
          FROM m
          JOIN orders o ON o.order_no = m.order_no
         WHERE o.created_at >= v_since
           AND ((m.prev IS NOT NULL
                 AND (m.prev -> 'amount_cents' IS DISTINCT FROM m.before -> 'amount_cents'
                      OR m.prev -> 'items' IS DISTINCT FROM m.before -> 'items'))
                OR (m.rn = 1
                    AND ((m.after ->> 'amount_cents')::bigint IS DISTINCT FROM o.amount_cents
                         OR m.after -> 'items' IS DISTINCT FROM _order_items_json(o.order_no))))
    )
    SELECT 16, 'an amended order''s amount and lines are its last amendment''s'::text,
           count(*), (array_agg(bad.order_no ORDER BY bad.order_no))[1:10]
      FROM bad;

    -- 17. No payment reminder after its order closed: the order's payment_reminder event comes
    --     before its transition event (order_paid, order_cancelled, order_released) in outbox id
    --     order. claim_reminder share-locks the order row, so a transition either committed
    --     before it (the reminder is not sent) or waits for it (its event gets a later id); ids,
    --     not times, since a transaction's now() is its start. Sample: order_no:offset.
    RETURN QUERY
    SELECT 17, 'no payment reminder sent for an order after it closed'::text,
           count(*), (array_agg(x.k ORDER BY x.k))[1:10]
      FROM (SELECT b.order_no || ':' || (b.payload ->> 'offset_seconds') AS k
              FROM outbox b
              JOIN orders o ON o.order_no = b.order_no
             WHERE b.event_type = 'payment_reminder'
               AND o.created_at >= v_since
               AND EXISTS (SELECT 1 FROM outbox t
                            WHERE t.order_no = b.order_no
                              AND t.event_type IN ('order_paid', 'order_cancelled', 'order_released')
                              AND t.id < b.id)) x;

    -- 18. Each reminder at most once, and its record agrees: per order and offset at most one
    --     payment_reminder event, exactly one for a reminder in state sent and none for any
    --     other (pending, skipped, or no reminder row). Sample: order_no:offset.
    RETURN QUERY
    WITH ev AS (
        SELECT b.order_no, (b.payload ->> 'offset_seconds')::int AS off, count(*) AS n
          FROM outbox b
          JOIN orders o ON o.order_no = b.order_no
         WHERE b.event_type = 'payment_reminder' AND o.created_at >= v_since
         GROUP BY 1, 2
    ), rs AS (
        SELECT r.order_no, r.offset_seconds AS off
          FROM reminders r
          JOIN orders o ON o.order_no = r.order_no
         WHERE r.state = 'sent' AND o.created_at >= v_since
    ), bad AS (
        SELECT coalesce(ev.order_no, rs.order_no) || ':' || coalesce(ev.off, rs.off) AS k
          FROM ev
          FULL JOIN rs ON rs.order_no = ev.order_no AND rs.off = ev.off
         WHERE ev.n IS DISTINCT FROM 1 OR rs.order_no IS NULL
    )
    SELECT 18, 'each payment reminder sent at most once, as its reminder row says'::text,
           count(*), (array_agg(bad.k ORDER BY bad.k))[1:10]
      FROM bad;

    -- The shop's checks (add_check) come last, after every built-in invariant: rows with
    -- invariant NULL, name shop:<name>, violations -1 for a check that failed (_reconcile_checks).
    RETURN QUERY SELECT c.invariant, c.name, c.violations, c.sample FROM _reconcile_checks() c;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.reconcile(timestamptz,interval,interval) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.reconcile(timestamp with time zone,interval,interval) IS
    'Checks the invariants (1-18) in one snapshot: one row each, with violations and samples, then the shop''s checks';
