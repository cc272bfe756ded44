-- examples/saleor/verify.sql: the end of run.sh's race. Runs the shop's checks (checks.sql, the
-- ones registered with add_check), ordergate's own reconcile, and the race's own checks: the
-- service's answers against the database, the hook anomalies, the lock order of the keys, the
-- deadlocks, the coverage. Prints one row per check and fails (an error, so psql exits non-zero)
-- naming every check with a violation. Read-only.
--
-- Needs saleor_race.answer (race.py's answers) and saleor_race.run (whether the staff acts ran).
\set ON_ERROR_STOP on
-- kafka = 1 (run.sh --kafka): the consumer cancelled on time, the scanner only behind it.
\if :{?kafka}
\else
\set kafka 0
\endif
SET search_path = saleor, pg_temp;

CREATE TEMP TABLE checks (name text PRIMARY KEY, violations bigint NOT NULL, sample text);

-- The shop's books, as reconcile() runs them once registered.
INSERT INTO checks SELECT 'stock_allocations', count(*), string_agg(detail, '; ') FROM check_stock_allocations();
INSERT INTO checks SELECT 'closed_allocations', count(*), string_agg(detail, '; ') FROM check_closed_allocations();
INSERT INTO checks SELECT 'vouchers', count(*), string_agg(detail, '; ') FROM check_vouchers();
INSERT INTO checks SELECT 'money', count(*), string_agg(detail, '; ') FROM check_money();

-- reconcile() ran the same four checks, registered with add_check, as shop:<name>, none failed
-- (-1), with the counts above.
INSERT INTO checks
SELECT 'reconcile_shop', count(*), string_agg(format('%s: reconcile %s, direct %s', e.name, r.violations, c.violations), '; ')
  FROM (VALUES ('stock_allocations'), ('closed_allocations'), ('vouchers'), ('money')) AS e(name)
  JOIN checks c ON c.name = e.name
  LEFT JOIN ordergate.reconcile() r ON r.name = 'shop:' || e.name
 WHERE r.violations IS DISTINCT FROM c.violations;

-- Every placement answered 'placed' is an order on both sides, every other left none; every
-- gate order is a shop order (the race deletes none); nothing is pending at the end.
INSERT INTO checks
SELECT 'orders_match', count(*), string_agg(x, ' ')
  FROM (SELECT a.order_no || ':' || a.outcome AS x
          FROM saleor_race.answer a
         WHERE a.action = 'place'
           AND ((a.outcome = 'placed') <> EXISTS (SELECT 1 FROM order_order o WHERE o.id::text = a.order_no)
                OR (a.outcome = 'placed') <> EXISTS (SELECT 1 FROM ordergate.orders g WHERE g.order_no = a.order_no))
        UNION ALL
        SELECT g.order_no FROM ordergate.orders g
         WHERE NOT EXISTS (SELECT 1 FROM order_order o WHERE o.id::text = g.order_no)
        UNION ALL
        SELECT g.order_no || ':pending' FROM ordergate.orders g WHERE g.status = 'pending_payment') v;

-- The keys: the gate's order_no is the uuid's text, and ordering the uuids orders their texts
-- byte by byte (the hooks lock `ORDER BY id`, ordergate by order_no COLLATE "C"); the numbers,
-- as text, would not (a race with orders #9 and #10 shows it).
INSERT INTO checks
SELECT 'lock_order_keys',
       (array_agg(o.id::text ORDER BY o.id) <> array_agg(o.id::text ORDER BY o.id::text COLLATE "C"))::int,
       NULL
  FROM order_order o;

-- No hook met an order it could not apply its transition to.
INSERT INTO checks
SELECT 'hook_anomalies', count(*), string_agg(format('%s %s: %s', event, order_no, problem), '; ')
  FROM ordergate_hook_anomaly;

-- The payment notes hook (three arguments): one order event per payment the gate did not put on
-- a shop order (late, double, wrong amount or currency), naming it, with the gate's amount in
-- the order's currency; none for anything else.
INSERT INTO checks
SELECT 'payment_notes', count(*), string_agg(coalesce(p.txn_no, e.ref), ' ')
  FROM (SELECT p.txn_no, p.amount_cents, p.currency, p.outcome
          FROM ordergate.payments p
         WHERE p.outcome IN ('late_payment', 'double_payment', 'amount_mismatch', 'currency_mismatch')
           AND EXISTS (SELECT 1 FROM order_order o WHERE o.id::text = p.order_no)) p
  FULL JOIN (SELECT e.parameters ->> 'reference' AS ref, count(*) AS k,
                    min(e.parameters ->> 'outcome') AS outcome, min(e.parameters ->> 'amount') AS amount
               FROM order_orderevent e GROUP BY 1) e ON e.ref = p.txn_no
 WHERE p.txn_no IS NULL OR e.ref IS NULL OR e.k <> 1 OR e.outcome <> p.outcome
    OR e.amount::numeric * 10::numeric ^ (SELECT c.exponent FROM ordergate.currencies c WHERE c.code = p.currency)
       <> p.amount_cents;

-- Each txn was answered once with the outcome ordergate recorded, further deliveries
-- 'duplicate' with that first outcome; every ordergate payment was answered.
INSERT INTO checks
SELECT 'answers_pay', count(*), string_agg(coalesce(p.txn_no, a.txn_no), ' ')
  FROM ordergate.payments p
  FULL JOIN (SELECT x.txn_no, count(*) FILTER (WHERE x.outcome <> 'duplicate') AS firsts,
                    min(x.outcome) FILTER (WHERE x.outcome <> 'duplicate') AS outcome,
                    bool_and(x.outcome <> 'duplicate'
                             OR x.first_outcome = (SELECT p2.outcome FROM ordergate.payments p2
                                                    WHERE p2.txn_no = x.txn_no)) AS dups_ok
               FROM saleor_race.answer x WHERE x.action IN ('pay', 'capture') GROUP BY 1) a
       ON a.txn_no = p.txn_no
 WHERE p.txn_no IS NULL OR a.txn_no IS NULL OR a.firsts <> 1 OR a.outcome <> p.outcome OR NOT a.dups_ok;

-- Staff cancels: answered 'cancelled' exactly for the orders ordergate logged as closed manually,
-- and those are 'canceled' in the shop, the timeouts 'expired'.
INSERT INTO checks
SELECT 'answers_close', count(*), string_agg(g.order_no, ' ')
  FROM ordergate.orders g
  JOIN order_order o ON o.id::text = g.order_no
  LEFT JOIN ordergate.status_log l ON l.order_no = g.order_no AND l.to_status = 'cancelled'
 WHERE EXISTS (SELECT 1 FROM saleor_race.answer a
                WHERE a.action = 'close' AND a.order_no = g.order_no AND a.outcome = 'cancelled')
       <> coalesce(l.source = 'manual', false)
    OR (g.status = 'cancelled' AND o.status <> CASE l.source WHEN 'manual' THEN 'canceled' ELSE 'expired' END);

-- The lock order promises no deadlock in this database (the service retries one, and counts).
INSERT INTO checks
SELECT 'deadlocks', deadlocks, NULL FROM pg_stat_database WHERE datname = current_database();

-- ordergate's own books: the built-in invariants (the shop's checks are reconcile_shop above).
INSERT INTO checks
SELECT 'reconcile', coalesce(sum(violations), 0),
       string_agg(format('%s %s: %s', invariant, name, array_to_string(sample, ',')), '; ')
           FILTER (WHERE violations <> 0)
  FROM ordergate.reconcile()
 WHERE name NOT LIKE 'shop:%';

-- The race raced: every story's outcome happened, in every currency, so a run that tested
-- nothing cannot pass. The staff acts count once the gate has them.
INSERT INTO checks
SELECT 'coverage', count(*) FILTER (WHERE n = 0), string_agg(what, ' ') FILTER (WHERE n = 0)
  FROM (SELECT w.what,
               CASE WHEN w.what LIKE 'log:%'
                    THEN (SELECT count(*) FROM ordergate.status_log l WHERE l.source = substr(w.what, 5))
                    WHEN w.what LIKE 'paid:%'
                    THEN (SELECT count(*) FROM ordergate.orders g
                           WHERE g.status = 'paid' AND g.currency = substr(w.what, 6))
                    ELSE (SELECT count(*) FROM saleor_race.answer a WHERE a.action || ':' || a.outcome = w.what)
               END AS n
          FROM (VALUES ('place:placed'), ('place:out_of_stock'), ('place:voucher_unavailable'),
                       ('pay:paid'), ('pay:partial'), ('pay:overpaid'), ('pay:late_payment'),
                       ('pay:duplicate'), ('pay:double_payment'), ('pay:amount_mismatch'),
                       ('pay:not_found'), ('close:cancelled'), ('begin:pending'),
                       ('capture:paid'), ('fail:failed'), ('log:manual'),
                       (CASE WHEN :kafka = 1 THEN 'log:timeout_consumer' ELSE 'log:timeout_scanner' END),
                       ('paid:USD'), ('paid:EUR'), ('paid:JPY'), ('paid:KWD')
                UNION ALL
                SELECT x FROM saleor_race.run r,
                       unnest(ARRAY['release:released', 'amend:amended', 'deadline:set']) AS u(x)
                 WHERE r.life) AS w(what)) c;

-- Payment reminders, when the gate has them (run.sh sets reminder_before_seconds = 1): the
-- customer's e-mail is an event reader's (way C: payment_reminder), never a hook's. Each sent
-- reminder is exactly one payment_reminder event, and some were sent; that none was sent after
-- its order left pending is ordergate's invariant 17 (by outbox order: a transaction's now() is
-- its start, so closed_at may precede a reminder that was in fact sent first).
SELECT to_regclass('ordergate.reminders') IS NOT NULL AS has_reminders \gset
\if :has_reminders
INSERT INTO checks
SELECT 'reminders', count(*), string_agg(x, ' ')
  FROM (SELECT coalesce(r.order_no, e.order_no) || ':events' AS x
          FROM (SELECT order_no, count(*) AS k FROM ordergate.reminders
                 WHERE state = 'sent' GROUP BY 1) r
          FULL JOIN (SELECT order_no, count(*) AS k FROM ordergate.outbox
                      WHERE event_type = 'payment_reminder' GROUP BY 1) e ON e.order_no = r.order_no
         WHERE r.k IS DISTINCT FROM e.k
        UNION ALL
        SELECT 'none sent' WHERE NOT EXISTS (SELECT 1 FROM ordergate.reminders WHERE state = 'sent')) v;
\endif

\echo
\echo 'examples/saleor: the shop against ordergate'
SELECT g.currency, g.status, o.status AS shop_status, o.charge_status, count(*) AS orders
  FROM ordergate.orders g JOIN order_order o ON o.id::text = g.order_no
 GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;
SELECT action, outcome, count(*) AS answers FROM saleor_race.answer GROUP BY 1, 2 ORDER BY 1, 2;
SELECT name, violations, left(sample, 200) AS sample FROM checks ORDER BY name;

DO $$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(name || '=' || violations, ', ' ORDER BY name) INTO v_bad
      FROM checks WHERE violations <> 0;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'examples/saleor: checks failed: %', v_bad;
    END IF;
    RAISE NOTICE 'examples/saleor: all % checks passed', (SELECT count(*) FROM checks);
END
$$;
