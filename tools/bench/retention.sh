#!/usr/bin/env bash
# Retention: the hot paths with a large closed history, before and after ordergatectl archive.
#
#   tools/bench/retention.sh [HISTORY_ORDERS] [ORDERGATECTL]
#
# Loads HISTORY_ORDERS (default 1,000,000) closed orders, closed 100 days ago (2/3 cancelled,
# 1/3 paid; 1-3 lines over 2,000 SKUs; a coupon on every third; payments, log rows, published
# events; a settled late payment on every hundredth cancelled one), plus a live set: 10,000
# pending orders due a minute ago and 1,000 orders paid half an hour ago. Bulk loads run as the
# superuser with session_replication_role = replica (keys hold by construction;
# original_expire_at, total and closed_at given). Then, before and after
# `ordergatectl archive --before 30d`:
#   scan      ordergate.scan_overdue(grace 0, first page, 500): 20 calls, ms each
#   claim     ordergate.claim_cancel of 500 due orders (timeout_scanner), one commit each:
#             5 calls on orders of their own, ms each
#   reconcile ordergate.reconcile() (whole database) and reconcile(now() - 7 days) (the
#             scanner's default window), once each
# and the archive itself: rows moved per second, batches, the slowest and the median batch
# (from its log lines). Prints figures; asserts only that the books reconcile before and after
# (invariant 6 aside: the live set is overdue on purpose).
# Drops the database at the end.
#
# Connection: libpq's environment; a superuser (a throwaway cluster: deploy/local/services.sh).
set -euo pipefail

n=${1:-1000000}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
ctl=${2:-$top/build/tools/ordergatectl}
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
db="og_bench_retention_$$"
log=$(mktemp)
trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true; rm -f "$log" "$log.json"' EXIT

[ -x "$ctl" ] || { echo "retention: $ctl not found (build ordergatectl, or give its path)" >&2; exit 2; }
"${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null
"${psql[@]}" -d "$db" -f "$top/schema/install.sql" >/dev/null

echo "retention: $(date -u +%FT%TZ) commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "retention: loading $n closed orders"
t0=$(date +%s)
"${psql[@]}" -d "$db" -v n="$n" <<'SQL'
SET synchronous_commit = off;
SET session_replication_role = replica;
SET maintenance_work_mem = '256MB';
CREATE TEMP TABLE g AS
SELECT g, CASE WHEN g % 3 < 2 THEN 'cancelled' ELSE 'paid' END AS status,
       now() - interval '100 days' AS closed
  FROM generate_series(0, :n - 1) g;
INSERT INTO ordergate.coupons (coupon_id, state)
SELECT 'CP-' || g, CASE status WHEN 'cancelled' THEN 'available' ELSE 'used' END FROM g WHERE g % 3 = 0;
INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at, original_expire_at, created_at, closed_at)
SELECT 'H' || g, status, 1000 + g % 9000, CASE WHEN g % 3 = 0 THEN 'CP-' || g END,
       closed, closed, closed - interval '15 minutes', closed
  FROM g;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'H' || g, 'SKU-' || ((g + k * 397) % 2000 + 1), k FROM g, generate_series(1, 1 + g % 3) k;
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome, created_at)
SELECT 'T' || g, 'H' || g, 1000 + g % 9000, 'card', 'paid', closed FROM g WHERE status = 'paid';
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome, created_at)
SELECT 'L' || g, 'H' || g, 1000 + g % 9000, 'card', 'late_payment', closed FROM g WHERE status = 'cancelled' AND g % 100 = 1;
INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, resolution, state, created_at, resolved_at, resolved_by)
SELECT 'H' || g, 'late_payment', 'L' || g, 1000 + g % 9000, 'manual_review', 'resolved', closed, closed, 'bench'
  FROM g WHERE status = 'cancelled' AND g % 100 = 1;
INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key, actor, created_at)
SELECT 'H' || g, 'pending_payment', status,
       CASE WHEN status = 'paid' THEN 'payment_callback' ELSE 'timeout_consumer' END,
       CASE WHEN status = 'paid' THEN 'T' || g ELSE 'H' || g END, 'bench', closed
  FROM g;
INSERT INTO ordergate.outbox (event_type, order_no, payload, created_at, published_at)
SELECT CASE WHEN status = 'paid' THEN 'order_paid' ELSE 'order_cancelled' END, 'H' || g, '{}', closed, closed FROM g;
INSERT INTO ordergate.outbox (event_type, order_no, payload, created_at, published_at)
SELECT 'reconciliation_alert', 'H' || g, '{}', closed, closed FROM g WHERE status = 'cancelled' AND g % 100 = 1;
-- The live set: 10,000 pending orders due a minute ago, 1,000 paid half an hour ago.
CREATE TEMP TABLE p AS SELECT g FROM generate_series(0, 9999) g;
INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, original_expire_at, created_at)
SELECT 'P' || g, 'pending_payment', 500, now() - interval '1 minute', now() - interval '1 minute', now() - interval '16 minutes' FROM p;
INSERT INTO ordergate.order_items (order_no, sku, qty) SELECT 'P' || g, 'SKU-' || (g % 2000 + 1), 1 FROM p;
INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, original_expire_at, created_at, closed_at)
SELECT 'D' || g, 'paid', 500, now(), now(), now() - interval '1 hour', now() - interval '30 minutes' FROM p WHERE g < 1000;
INSERT INTO ordergate.order_items (order_no, sku, qty) SELECT 'D' || g, 'SKU-' || (g % 2000 + 1), 1 FROM p WHERE g < 1000;
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome)
SELECT 'TD' || g, 'D' || g, 500, 'card', 'paid' FROM p WHERE g < 1000;
INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key, actor)
SELECT 'D' || g, 'pending_payment', 'paid', 'payment_callback', 'TD' || g, 'bench' FROM p WHERE g < 1000;
INSERT INTO ordergate.outbox (event_type, order_no, payload, published_at)
SELECT 'order_paid', 'D' || g, '{}', now() FROM p WHERE g < 1000;
-- Stock: what pending and paid orders hold, plus 1,000,000 available per sku.
INSERT INTO ordergate.inventory (sku, available, total)
SELECT 'SKU-' || s, 1000000, 1000000 + coalesce(h.q, 0)
  FROM generate_series(1, 2000) s
  LEFT JOIN (SELECT it.sku, sum(it.qty) AS q FROM ordergate.order_items it
               JOIN ordergate.orders o ON o.order_no = it.order_no
              WHERE o.status IN ('pending_payment', 'paid') GROUP BY it.sku) h ON h.sku = 'SKU-' || s;
RESET session_replication_role;
SELECT setval(pg_get_serial_sequence('ordergate.outbox', 'id'), (SELECT max(id) FROM ordergate.outbox)) \g /dev/null
VACUUM ANALYZE;
CHECKPOINT;

-- Timing helpers (bench only: each runs the bench's own statements).
CREATE TABLE public.bench_ms (phase text, what text, ms double precision);
CREATE PROCEDURE public.bench_scan(p_phase text) LANGUAGE plpgsql AS $$
DECLARE t timestamptz;
BEGIN
    FOR i IN 1..20 LOOP
        t := clock_timestamp();
        PERFORM count(*) FROM ordergate.scan_overdue('0 seconds', NULL, NULL, 500);
        INSERT INTO public.bench_ms VALUES (p_phase, 'scan_overdue page 500', 1000 * extract(epoch FROM clock_timestamp() - t));
        COMMIT;
    END LOOP;
END $$;
CREATE PROCEDURE public.bench_claim(p_phase text, p_from int) LANGUAGE plpgsql AS $$
DECLARE t timestamptz; v text[];
BEGIN
    FOR i IN 0..4 LOOP
        SELECT array_agg('P' || g) INTO v FROM generate_series(p_from + i * 500, p_from + i * 500 + 499) g;
        t := clock_timestamp();
        PERFORM count(*) FROM ordergate.claim_cancel(v, 'timeout_scanner');
        INSERT INTO public.bench_ms VALUES (p_phase, 'claim_cancel 500', 1000 * extract(epoch FROM clock_timestamp() - t));
        COMMIT;
    END LOOP;
END $$;
-- Invariant 6 (no order pending past its deadline + grace + one scanner interval) is left out
-- of the check: the live set's pending orders are overdue on purpose and only some are claimed,
-- so a run longer than grace + interval (a large history) would count the rest.
CREATE PROCEDURE public.bench_reconcile(p_phase text) LANGUAGE plpgsql AS $$
DECLARE t timestamptz; v numeric;
BEGIN
    t := clock_timestamp();
    SELECT sum(violations) FILTER (WHERE invariant <> 6) INTO v FROM ordergate.reconcile();
    INSERT INTO public.bench_ms VALUES (p_phase, 'reconcile all', 1000 * extract(epoch FROM clock_timestamp() - t));
    IF v <> 0 THEN RAISE EXCEPTION 'retention: % violations (%, whole database)', v, p_phase; END IF;
    t := clock_timestamp();
    SELECT sum(violations) FILTER (WHERE invariant <> 6) INTO v FROM ordergate.reconcile(now() - interval '7 days');
    INSERT INTO public.bench_ms VALUES (p_phase, 'reconcile 7 days', 1000 * extract(epoch FROM clock_timestamp() - t));
    IF v <> 0 THEN RAISE EXCEPTION 'retention: % violations (%, 7 days)', v, p_phase; END IF;
    COMMIT;
END $$;
SQL
echo "retention: loaded in $(($(date +%s) - t0)) s"

sizes() {
    "${psql[@]}" -d "$db" -At -c "SELECT '$1: hot tables ' || pg_size_pretty(sum(pg_total_relation_size(c.oid))) || ', orders ' || (SELECT count(*) FROM ordergate.orders) || ', archived orders ' || (SELECT count(*) FROM ordergate.archived_orders) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ordergate' AND c.relkind = 'r' AND c.relname NOT LIKE 'archived_%'"
}
phase() {
    "${psql[@]}" -d "$db" -c "CALL public.bench_scan('$1')" -c "CALL public.bench_claim('$1', $2)" \
        -c "CALL public.bench_reconcile('$1')"
}

sizes before
phase before 0
echo "retention: archiving (ordergatectl archive --before 30d --batch 10000)"
a0=$(date +%s.%N)
"$ctl" archive --db "dbname=$db" --before 30d --batch 10000 --json >"$log.json" 2>"$log"
a1=$(date +%s.%N)
"${psql[@]}" -d "$db" -c "VACUUM ANALYZE"
sizes after
phase after 5000

echo
echo "retention: $n historical orders; ms per call (p50 and max of the calls)"
"${psql[@]}" -d "$db" -P pager=off <<'SQL'
SELECT what, phase, count(*) AS calls,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p50_ms,
       round(max(ms)::numeric, 2) AS max_ms
  FROM public.bench_ms GROUP BY what, phase ORDER BY what, phase DESC;
SQL
ms=$(grep -o ' ms=[0-9]*' "$log" | cut -d= -f2 | sort -n || true)
echo "archive: $(cat "$log.json")"
echo "archive: wall $(awk -v a="$a0" -v b="$a1" 'BEGIN { printf "%.1f", b - a }') s," \
    "$(grep -c event=archive_batch "$log") batches, slowest batch $(tail -n1 <<<"$ms") ms," \
    "median batch $(awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }' <<<"$ms") ms"
echo "retention: done, load $(cut -d' ' -f1-3 /proc/loadavg)"
