-- examples/mall/check.sql: the end of run.sh's race. Compares the shop's own tables with
-- ordergate's, the hook audit with ordergate's winners, and the services' answers with the
-- database; prints one row per check and fails (an error, so psql exits non-zero) when any check
-- has a violation.
--
-- Needs: mall_race.initial_stock(sku_id, stock), the catalogue before the race, and
-- mall_race.answer(service, action, order_sn, txn_no, amount_cents, outcome, first_outcome),
-- every line the services printed. Read-only on the shop and on ordergate.
\set ON_ERROR_STOP on
-- kafka = 1 (run.sh --kafka): the consumer ran, so consumer cancels must be among the outcomes.
\if :{?kafka}
\else
\set kafka 0
\endif
SET search_path = mall, pg_temp;

CREATE TEMP TABLE checks (name text PRIMARY KEY, violations bigint NOT NULL, sample text);

-- Every shop order is an ordergate order with the same amount and the matching status, and
-- the reverse; nothing is left pending (every deadline passed and the scanner swept).
INSERT INTO checks
SELECT 'orders_match', count(*), string_agg(coalesce(o.order_sn, g.order_no), ' ' ORDER BY 1)
  FROM oms_order o
  FULL JOIN ordergate.orders g ON g.order_no = o.order_sn
 WHERE o.id IS NULL OR g.order_no IS NULL
    OR (o.pay_amount * 100)::bigint <> g.amount_cents
    OR o.status <> CASE g.status WHEN 'pending_payment' THEN 0 WHEN 'paid' THEN 1 ELSE 4 END
    OR g.coupon_id IS NOT NULL;
INSERT INTO checks
SELECT 'orders_settled', count(*), string_agg(order_no, ' ')
  FROM ordergate.orders WHERE status = 'pending_payment';

-- Stock, per SKU: on the shelf = initial - sold; sold (sale) = units of paid orders; locked =
-- units of pending orders (none at the end). So initial = (stock - lock_stock) + lock_stock +
-- sold: sellable + locked + sold. A release applied twice or never breaks one of these.
INSERT INTO checks
SELECT 'stock_books', count(*),
       string_agg(format('sku %s: initial %s stock %s lock %s sale %s paid %s pending %s',
                         k.id, i.stock, k.stock, k.lock_stock, k.sale, coalesce(u.paid, 0),
                         coalesce(u.pending, 0)), '; ')
  FROM pms_sku_stock k
  JOIN mall_race.initial_stock i ON i.sku_id = k.id
  LEFT JOIN (SELECT it.product_sku_id AS sku,
                    sum(it.product_quantity) FILTER (WHERE g.status = 'paid') AS paid,
                    sum(it.product_quantity) FILTER (WHERE g.status = 'pending_payment') AS pending
               FROM oms_order_item it
               JOIN ordergate.orders g ON g.order_no = it.order_sn
              GROUP BY 1) u ON u.sku = k.id
 WHERE k.stock <> i.stock - coalesce(u.paid, 0)
    OR k.sale <> coalesce(u.paid, 0)
    OR k.lock_stock <> coalesce(u.pending, 0)
    OR i.stock <> (k.stock - k.lock_stock) + k.lock_stock + k.sale;

-- Coupons: an order with a coupon has exactly one history row naming it; that row is used (1)
-- while the order is pending or paid and back to unused (0) once it is cancelled. A row naming
-- no order is unused; no row names an order that does not exist (a refused placement left none).
INSERT INTO checks
SELECT 'coupons', count(*), string_agg(x, ' ')
  FROM (SELECT o.order_sn AS x
          FROM oms_order o
          LEFT JOIN ordergate.orders g ON g.order_no = o.order_sn
         WHERE o.coupon_id IS NOT NULL
           AND (SELECT count(*) FILTER (WHERE h.use_status = CASE g.status WHEN 'cancelled' THEN 0 ELSE 1 END)
                       || '/' || count(*)
                  FROM sms_coupon_history h WHERE h.order_sn = o.order_sn) <> '1/1'
        UNION ALL
        SELECT 'history ' || h.id
          FROM sms_coupon_history h
         WHERE (h.order_sn IS NULL AND h.use_status <> 0)
            OR (h.order_sn IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM oms_order o WHERE o.order_sn = h.order_sn AND o.coupon_id IS NOT NULL))
        UNION ALL
        SELECT o.order_sn FROM oms_order o
         WHERE o.coupon_id IS NULL AND EXISTS (SELECT 1 FROM sms_coupon_history h WHERE h.order_sn = o.order_sn)) v;

-- The hook audit: each call's order numbers are non-empty, distinct and in ordergate's order
-- (byte order), with a source that fits the event.
INSERT INTO checks
SELECT 'hook_call_shape', count(*), string_agg('call ' || c.id, ' ')
  FROM ordergate_hook_call c
 WHERE cardinality(c.order_sns) = 0
    OR c.order_sns <> ARRAY(SELECT DISTINCT x COLLATE "C" FROM unnest(c.order_sns) AS u(x) ORDER BY 1)
    OR (c.event = 'cancelled' AND c.source NOT IN ('timeout_consumer', 'timeout_scanner', 'manual'))
    OR (c.event IN ('paid', 'late_payment') AND c.source <> 'payment_callback');

-- Each hook ran exactly once per order its claim won: cancelled for every cancelled order (with
-- the source ordergate logged), paid for every paid order, and for no other; late_payment once
-- per late payment ordergate recorded.
CREATE TEMP VIEW hooked AS
SELECT c.event, c.source, u.x AS order_no
  FROM ordergate_hook_call c CROSS JOIN LATERAL unnest(c.order_sns) AS u(x);
INSERT INTO checks
SELECT 'hook_once_' || ev, count(*), string_agg(n, ' ')
  FROM (SELECT e.ev, g.order_no AS n
          FROM (VALUES ('cancelled'), ('paid')) AS e(ev)
         CROSS JOIN ordergate.orders g
          LEFT JOIN ordergate.status_log l ON l.order_no = g.order_no
         WHERE (SELECT count(*) FROM hooked h WHERE h.event = e.ev AND h.order_no = g.order_no)
               <> CASE WHEN g.status = e.ev THEN 1 ELSE 0 END
            OR (g.status = e.ev AND NOT EXISTS (SELECT 1 FROM hooked h
                                                 WHERE h.event = e.ev AND h.order_no = g.order_no
                                                   AND h.source = l.source))) v
 GROUP BY ev;
INSERT INTO checks VALUES ('hook_once_cancelled', 0, NULL), ('hook_once_paid', 0, NULL)
ON CONFLICT (name) DO NOTHING;
INSERT INTO checks
SELECT 'hook_once_late_payment', count(*), string_agg(n, ' ')
  FROM (SELECT coalesce(p.order_no, h.order_no) AS n
          FROM (SELECT order_no, count(*) AS k FROM ordergate.payments
                 WHERE outcome = 'late_payment' GROUP BY 1) p
          FULL JOIN (SELECT order_no, count(*) AS k FROM hooked
                      WHERE event = 'late_payment' GROUP BY 1) h ON h.order_no = p.order_no
         WHERE p.k IS DISTINCT FROM h.k) v;

-- No hook found an order it could not apply its transition to (it records those rather than
-- raising; see hooks.sql).
INSERT INTO checks
SELECT 'hook_anomalies', count(*), string_agg(format('%s %s: %s', event, order_sn, problem), '; ')
  FROM ordergate_hook_anomaly;

-- The shop's operate history: one row per transition and one per late payment, each with the
-- order's status.
INSERT INTO checks
SELECT 'operate_history', count(*), string_agg(o.order_sn, ' ')
  FROM oms_order o
 WHERE (SELECT count(*) FROM oms_order_operate_history h
         WHERE h.order_id = o.id AND h.order_status = o.status)
       <> CASE WHEN o.status = 0 THEN 0 ELSE 1 END
          + (SELECT count(*) FROM ordergate.payments p
              WHERE p.order_no = o.order_sn AND p.outcome = 'late_payment')
    OR EXISTS (SELECT 1 FROM oms_order_operate_history h
                WHERE h.order_id = o.id AND h.order_status <> o.status);

-- The pay type the service recorded after a won payment: the paying txn's channel.
INSERT INTO checks
SELECT 'pay_type', count(*), string_agg(o.order_sn, ' ')
  FROM oms_order o
  LEFT JOIN ordergate.payments p ON p.order_no = o.order_sn AND p.outcome = 'paid'
 WHERE o.pay_type <> CASE p.channel WHEN 'alipay' THEN 1 WHEN 'wechat' THEN 2 ELSE 0 END;

-- The services' answers agree with the database: every placement answered 'placed' is an order
-- and every other answer left none; each txn_no was answered once with the outcome ordergate
-- recorded, any further delivery 'duplicate' with that first outcome; each ordergate payment was
-- answered; a manual close answered 'cancelled' exactly for the orders ordergate logged as closed
-- manually.
INSERT INTO checks
SELECT 'answers_place', count(*), string_agg(a.order_sn || ':' || a.outcome, ' ')
  FROM mall_race.answer a
 WHERE a.action = 'place'
   AND (a.outcome = 'placed') <> EXISTS (SELECT 1 FROM oms_order o WHERE o.order_sn = a.order_sn);
INSERT INTO checks
SELECT 'answers_pay', count(*), string_agg(coalesce(p.txn_no, a.txn_no), ' ')
  FROM ordergate.payments p
  FULL JOIN (SELECT txn_no, count(*) FILTER (WHERE outcome <> 'duplicate') AS firsts,
                    min(outcome) FILTER (WHERE outcome <> 'duplicate') AS outcome,
                    bool_and(outcome <> 'duplicate' OR first_outcome = (SELECT p2.outcome FROM ordergate.payments p2
                                                                         WHERE p2.txn_no = answer.txn_no)) AS dups_ok
               FROM mall_race.answer WHERE action = 'pay' GROUP BY txn_no) a ON a.txn_no = p.txn_no
 WHERE p.txn_no IS NULL OR a.txn_no IS NULL OR a.firsts <> 1 OR a.outcome <> p.outcome OR NOT a.dups_ok;
INSERT INTO checks
SELECT 'answers_close', count(*), string_agg(g.order_no, ' ')
  FROM ordergate.orders g
  LEFT JOIN ordergate.status_log l ON l.order_no = g.order_no
 WHERE (l.source = 'manual')
       <> EXISTS (SELECT 1 FROM mall_race.answer a
                   WHERE a.action = 'close' AND a.order_sn = g.order_no AND a.outcome = 'cancelled')
    OR (SELECT count(*) FROM mall_race.answer a
         WHERE a.action = 'close' AND a.order_sn = g.order_no AND a.outcome = 'cancelled') > 1;

-- The lock order promises no deadlock in this database (the services would have retried one).
INSERT INTO checks
SELECT 'deadlocks', deadlocks, NULL FROM pg_stat_database WHERE datname = current_database();

-- ordergate's own books: the eighteen invariants.
INSERT INTO checks
SELECT 'reconcile', coalesce(sum(violations), 0),
       string_agg(format('%s %s: %s', invariant, name, array_to_string(sample, ',')), '; ')
           FILTER (WHERE violations > 0)
  FROM ordergate.reconcile();

-- The race raced: every kind of answer and every kind of cancel happened at least once, so a
-- run that tested nothing cannot pass.
INSERT INTO checks
SELECT 'coverage', count(*) FILTER (WHERE n = 0),
       string_agg(what, ' ') FILTER (WHERE n = 0)
  FROM (SELECT w.what,
               CASE WHEN w.what LIKE 'log:%'
                    THEN (SELECT count(*) FROM ordergate.status_log l WHERE l.source = substr(w.what, 5))
                    ELSE (SELECT count(*) FROM mall_race.answer a
                           WHERE a.action || ':' || a.outcome = w.what)
               END AS n
          FROM (VALUES ('place:placed'), ('place:out_of_stock'), ('place:coupon_unavailable'),
                       ('pay:paid'), ('pay:late_payment'), ('pay:duplicate'), ('pay:double_payment'),
                       ('pay:amount_mismatch'), ('pay:not_found'), ('close:cancelled'),
                       ('log:manual'), ('log:payment_callback'),
                       -- the timeouts: the scanner's alone, or the consumer's first
                       (CASE WHEN :kafka = 1 THEN 'log:timeout_consumer' ELSE 'log:timeout_scanner' END)
               ) AS w(what)) c;

\echo
\echo 'examples/mall: the shop against ordergate'
SELECT g.status, count(*) AS orders,
       count(*) FILTER (WHERE o.coupon_id IS NOT NULL) AS with_coupon
  FROM ordergate.orders g JOIN oms_order o ON o.order_sn = g.order_no
 GROUP BY 1 ORDER BY 1;
SELECT action, outcome, count(*) AS answers FROM mall_race.answer GROUP BY 1, 2 ORDER BY 1, 2;
SELECT event, source, count(*) AS calls, sum(cardinality(order_sns)) AS orders,
       max(cardinality(order_sns)) AS largest
  FROM ordergate_hook_call GROUP BY 1, 2 ORDER BY 1, 2;
SELECT name, violations, left(sample, 200) AS sample FROM checks ORDER BY name;

DO $$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(name || '=' || violations, ', ' ORDER BY name) INTO v_bad
      FROM checks WHERE violations > 0;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'examples/mall: checks failed: %', v_bad;
    END IF;
    RAISE NOTICE 'examples/mall: all % checks passed', (SELECT count(*) FROM checks);
END
$$;
