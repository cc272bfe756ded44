#!/usr/bin/env bash
# Server time of the console's reads (schema/functions/console/) at scale: what a page costs the
# database with ORDERS orders and EXCEPTIONS exceptions.
#
#   tools/bench/sql/bench_console.sh [ORDERS] [EXCEPTIONS] [RUNS]      defaults 3000000 100000 20
#
# Loads, in a fresh database built with schema/install.sql: ORDERS orders (a tenth pending with
# deadlines over the next two hours, the rest paid or cancelled over the last day, 60,000 of them
# cancelled in the last hour by the consumer, the scanner or by hand with their status log), each
# with shop data {"email", "ref"}; EXCEPTIONS exceptions over the last 30 days (every kind but
# refused_payment, a third of them open, a payment each with one of four channels). Then runs
# each console read RUNS times in one session and prints the median and the worst "Execution
# Time" of EXPLAIN (ANALYZE) (the server time, without the network) and the backend's CPU time
# per call (/proc, so run it on the server's host: on a loaded machine the wall times grow, the
# CPU time much less). The first row is a peer measured in the same run, a count over a million
# generated rows (about 60 ms on an idle core of a current machine): read the others against it.
# Drops the database.
#
# The overview is measured twice: before any scanner sweep counted the minutes (the whole hour's
# cancels counted from orders and status_log, as on a gate without a scanner), then as it reads
# with the scanner's default schedule at its worst: the sweep's per-minute counts
# (console_cancel_minutes) eight minutes old (a sweep every 300 s, the newest two minutes never
# counted), the eight minutes after them counted from the orders.
#
# ORDERGATE_BENCH_EXPLAIN=FILE writes to FILE, after each overview row, the plan of a further
# overview call with each part's actual time and buffers (auto_explain of its statements, those
# over 1 ms): in its top statement the InitPlans follow the result's keys in order (pending, due,
# cancels, cancels_live_from, lateness, exceptions, refunds, outbox, scanner, reconcile), and
# the minutes counted from the orders are the separate plan of _console_cancels.
#
# ORDERGATE_BENCH_DB=NAME keeps the database afterwards and, when it exists, reuses it after a
# schema change: it applies the tree's migrations the database has not recorded and every function
# file (as install.sql lists them), moves the last hour's cancels to the hour before now (a load
# takes minutes at 10 million orders; the hour it loaded drifts out of the overview's window) and
# forgets the sweep's counts. ORDERGATE_BENCH_SHOP_GIN=0 measures the shop-field search without
# the shop's GIN index (dropped when there; the default 1 builds it when missing).
#
# Connection: libpq's environment; the role must create databases (superuser on a throwaway
# cluster).
set -euo pipefail

orders=${1:-3000000}
excs=${2:-100000}
runs=${3:-20}
gin=${ORDERGATE_BENCH_SHOP_GIN:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
db="og_bench_console_$$"
db=${ORDERGATE_BENCH_DB:-$db}
# ORDERGATE_BENCH_DB=NAME: that database, kept afterwards (for EXPLAIN by hand).
[ -n "${ORDERGATE_BENCH_DB:-}" ] || trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true' EXIT

loaded=$("${psql[@]}" -At -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")
if [ "$loaded" = 1 ] && [ -n "${ORDERGATE_BENCH_DB:-}" ]; then
    echo "bench: reusing $db with the schema of $top/schema"
    # The migrations it has not recorded, each as install.sql applies it, then every function
    # file in one transaction (bodies checked when called, as install.sql does).
    for f in "$top"/schema/migrations/[0-9]*.sql; do
        v=$(basename "$f"); v=${v%%_*}
        if [ "$("${psql[@]}" -At -d "$db" -c "SELECT count(*) FROM ordergate.schema_migrations WHERE version = '$v'")" = 0 ]; then
            echo "bench: applying $(basename "$f")"
            { cat "$f"; echo "RESET ROLE; INSERT INTO ordergate.schema_migrations (version) VALUES ('$v');"; } |
                "${psql[@]}" -1 -d "$db" -f - >/dev/null
        fi
    done
    {
        echo "SET LOCAL ROLE ordergate_owner; SET LOCAL search_path = ordergate, pg_temp;"
        echo "SET LOCAL check_function_bodies = off;"
        sed -n 's|^\\ir \(functions/.*\.sql\)$|\\i '"$top"'/schema/\1|p' "$top/schema/install.sql"
    } | "${psql[@]}" -1 -d "$db" -f - >/dev/null
    "${psql[@]}" -d "$db" <<'SQL'
-- The last hour's cancels as the load wrote them (g < 60000, not pending), due and closed again
-- relative to now; their status log with them. Triggers off: the rows are rewritten, not moved
-- through the gate.
SET session_replication_role = replica;
UPDATE ordergate.orders o
   SET expire_at = t.e, original_expire_at = t.e,
       created_at = t.e - interval '30 minutes', closed_at = t.e + (t.g % 7) * interval '100 milliseconds'
  FROM (SELECT g, 'B' || g AS order_no, now() - (g % 3600) * interval '1 second' - interval '2 seconds' AS e
          FROM generate_series(1, 59999) g WHERE g % 10 <> 0) t
 WHERE o.order_no = t.order_no;
UPDATE ordergate.status_log s SET created_at = o.closed_at
  FROM ordergate.orders o
 WHERE o.order_no = s.order_no AND s.from_status = 'pending_payment'
   AND o.order_no IN (SELECT 'B' || g FROM generate_series(1, 59999) g WHERE g % 10 <> 0);
RESET session_replication_role;
DELETE FROM ordergate.console_cancel_minutes;
VACUUM (ANALYZE) ordergate.orders, ordergate.status_log, ordergate.console_cancel_minutes;
SQL
else
"${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null
"${psql[@]}" -d "$db" -f "$top/schema/install.sql" >/dev/null
start=$(date +%s)
echo "bench: loading $orders orders and $excs exceptions"
"${psql[@]}" -d "$db" -v n="$orders" -v x="$excs" -v gin="$gin" <<'SQL'
-- A bulk load: no trigger or foreign-key check per row (every value is given), and the secondary
-- indexes built once at the end instead of row by row (the same definitions, read back from the
-- catalog).
SET session_replication_role = replica;
CREATE TEMP TABLE bench_indexes AS
SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'ordergate' AND tablename IN ('orders', 'status_log', 'payments', 'exceptions')
   AND indexname NOT LIKE '%pkey';
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT indexname FROM bench_indexes LOOP
        EXECUTE format('DROP INDEX ordergate.%I', r.indexname);
    END LOOP;
END $$;
-- g % 10 = 0: pending, due over the next two hours; g < 60000 (not pending): cancelled in the
-- last hour; the rest paid or cancelled over the last day.
INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, original_expire_at,
                              created_at, closed_at, shop, currency)
SELECT 'B' || g, s, 1000 + g % 9000, e, e, e - interval '30 minutes',
       CASE WHEN s <> 'pending_payment' THEN c END,
       jsonb_build_object('email', 'u' || (g % 500000) || '@example.com', 'ref', 'R' || g), 'USD'
  FROM generate_series(1, :n) g,
       LATERAL (SELECT CASE WHEN g % 10 = 0 THEN 'pending_payment'
                            WHEN g < 60000 OR g % 2 = 1 THEN 'cancelled' ELSE 'paid' END AS s) st,
       LATERAL (SELECT CASE WHEN g % 10 = 0 THEN now() + (g % 7200) * interval '1 second'
                            WHEN g < 60000 THEN now() - (g % 3600) * interval '1 second' - interval '2 seconds'
                            ELSE now() - (g % 86400) * interval '1 second' - interval '1 hour' END AS e) ex,
       LATERAL (SELECT CASE WHEN g < 60000 THEN e + (g % 7) * interval '100 milliseconds' ELSE e END AS c) cl;
INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key, actor, created_at)
SELECT o.order_no, 'pending_payment', o.status,
       CASE WHEN o.status = 'paid' THEN 'payment_callback'
            ELSE (ARRAY['timeout_consumer', 'timeout_consumer', 'timeout_scanner', 'manual'])[1 + (hashtext(o.order_no) & 3)] END,
       o.order_no, 'bench', o.closed_at
  FROM ordergate.orders o WHERE o.status <> 'pending_payment';
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome, created_at, currency)
SELECT 'TX' || g, 'B' || (g * 7 + 1), 1000 + g % 5000, (ARRAY['card', 'wallet', 'bank', 'cash'])[1 + g % 4],
       'late_payment', now() - (g % 2592000) * interval '1 second', 'USD'
  FROM generate_series(1, :x) g;
INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, resolution, state, note,
                                  created_at, resolved_at, resolved_by, currency)
SELECT p.order_no,
       (ARRAY['late_payment', 'double_payment', 'amount_mismatch', 'unknown_order', 'overpaid',
              'currency_mismatch', 'cancelled_part'])[1 + g % 7],
       p.txn_no, p.amount_cents, CASE WHEN g % 2 = 0 THEN 'auto_refund' ELSE 'manual_review' END,
       CASE WHEN g % 3 = 0 THEN 'open' ELSE 'resolved' END, 'bench', p.created_at,
       CASE WHEN g % 3 <> 0 THEN p.created_at + interval '1 hour' END,
       CASE WHEN g % 3 <> 0 THEN 'bench' END, 'USD'
  FROM generate_series(1, :x) g JOIN ordergate.payments p ON p.txn_no = 'TX' || g;
SET maintenance_work_mem = '256MB';
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT indexdef FROM bench_indexes LOOP
        EXECUTE r.indexdef;
    END LOOP;
END $$;
-- The index a shop that searches its own data makes (docs/console.md, "Searching the shop's
-- data"); the schema has none.
\if :gin
CREATE INDEX orders_shop_idx ON ordergate.orders USING gin (shop jsonb_path_ops);
\endif
RESET session_replication_role;
VACUUM (ANALYZE) ordergate.orders, ordergate.status_log, ordergate.payments, ordergate.exceptions;
SQL
echo "bench: loaded in $(( $(date +%s) - start )) s:" \
    "$("${psql[@]}" -At -d "$db" -c "SELECT count(*) || ' orders, ' || (SELECT count(*) FROM ordergate.exceptions) || ' exceptions (' || (SELECT count(*) FROM ordergate.exceptions WHERE state = 'open') || ' open), ' || (SELECT count(*) FROM ordergate.orders WHERE status = 'pending_payment') || ' pending' FROM ordergate.orders")"
fi

# The shop's GIN index as asked (a reused database may have it or not).
if [ "$gin" = 0 ]; then
    "${psql[@]}" -d "$db" -c "DROP INDEX IF EXISTS ordergate.orders_shop_idx"
else
    "${psql[@]}" -d "$db" -c "SET maintenance_work_mem = '256MB'" \
        -c "CREATE INDEX IF NOT EXISTS orders_shop_idx ON ordergate.orders USING gin (shop jsonb_path_ops)"
fi
echo "bench: shop GIN index: $("${psql[@]}" -At -d "$db" -c "SELECT coalesce(pg_size_pretty(pg_relation_size(to_regclass('ordergate.orders_shop_idx'))), 'none')");" \
    "cancels in the last hour: $("${psql[@]}" -At -d "$db" -c "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled' AND closed_at >= now() - interval '1 hour' AND status <> 'pending_payment'")"

# A page deep in the open queue: the cursor of its 50,000th newest open exception... or the last.
cursor=$("${psql[@]}" -At -d "$db" -c "SELECT created_at || '|' || id FROM ordergate.exceptions WHERE state = 'open' ORDER BY created_at DESC, id DESC OFFSET least(30000, (SELECT count(*) - 1 FROM ordergate.exceptions WHERE state = 'open')) LIMIT 1")
before_at=${cursor%|*}
before_id=${cursor#*|}

# name|statement
queries=(
"peer: count(*) of generate_series(1, 10^6)|SELECT count(*) FROM generate_series(1, 1000000)"
"=|DELETE FROM ordergate.console_cancel_minutes"
"overview, before any sweep (hour from orders)|SELECT ordergate.console_overview()"
"=|DO \$\$ BEGIN WHILE ordergate._console_cancels_rollup() > 0 LOOP END LOOP; END \$\$"
"=|DELETE FROM ordergate.console_cancel_minutes WHERE minute >= date_trunc('minute', now()) - interval '8 minutes'"
"overview (sweep's counts 8 min old)|SELECT ordergate.console_overview()"
"exceptions, open, first page|SELECT * FROM ordergate.console_exceptions('open', NULL, NULL, NULL, NULL, NULL, NULL, 50)"
"exceptions, open, page 600|SELECT * FROM ordergate.console_exceptions('open', NULL, NULL, NULL, NULL, '$before_at', $before_id, 50)"
"exceptions, open, kind+channel+amount|SELECT * FROM ordergate.console_exceptions('open', 'overpaid', NULL, 5000, 'bank', NULL, NULL, 50)"
"exceptions, open, older than 7 days|SELECT * FROM ordergate.console_exceptions('open', NULL, 604800, NULL, NULL, NULL, NULL, 50)"
"exceptions, all states, first page|SELECT * FROM ordergate.console_exceptions('all', NULL, NULL, NULL, NULL, NULL, NULL, 50)"
"exceptions, resolved, kind|SELECT * FROM ordergate.console_exceptions('resolved', 'unknown_order', NULL, NULL, NULL, NULL, NULL, 50)"
"one exception|SELECT ordergate.console_exception((SELECT max(id) FROM ordergate.exceptions))"
"orders by number prefix|SELECT * FROM ordergate.console_orders('order_no', 'B12345', 50)"
"orders by txn_no|SELECT * FROM ordergate.console_orders('txn_no', 'TX777', 50)"
"orders by shop field|SELECT * FROM ordergate.console_orders('shop', 'email=u4242@example.com', 50)"
"one order's timeline|SELECT ordergate.console_order('B5440')"
)
work=$(mktemp -d)
hz=$(getconf CLK_TCK)
printf '%-40s %10s %10s %10s\n' "console read ($orders orders, $excs exceptions)" "median ms" "worst ms" "CPU ms"
for q in "${queries[@]}"; do
    name=${q%%|*}
    stmt=${q#*|}
    if [ "$name" = "=" ]; then
        # A step between reads (the sweep's counts), run once, not measured.
        "${psql[@]}" -At -d "$db" -c "$stmt" >/dev/null
        continue
    fi
    {
        echo 'SELECT pg_backend_pid() AS pid \gset'
        echo '\setenv OG_PID :pid'
        echo "\\! awk '{print \$14 + \$15}' /proc/\$OG_PID/stat > $work/cpu0"
        for _ in $(seq "$runs"); do echo "EXPLAIN (ANALYZE, TIMING OFF) $stmt;"; done
        echo "\\! awk '{print \$14 + \$15}' /proc/\$OG_PID/stat > $work/cpu1"
    } >"$work/script.sql"
    sorted=$("${psql[@]}" -At -d "$db" -f "$work/script.sql" |
        sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' | sort -n)
    cpu=$(awk -v a="$(cat "$work/cpu0")" -v b="$(cat "$work/cpu1")" -v hz="$hz" -v n="$runs" \
        'BEGIN { printf "%.1f", (b - a) * 1000 / hz / n }')
    printf '%-40s %10s %10s %10s\n' "$name" "$(echo "$sorted" | sed -n "$(( (runs + 1) / 2 ))p")" \
        "$(echo "$sorted" | tail -1)" "$cpu"
    if [ -n "${ORDERGATE_BENCH_EXPLAIN:-}" ] && [[ $name == overview* ]]; then
        echo "== $name ($orders orders, $excs exceptions)" >>"$ORDERGATE_BENCH_EXPLAIN"
        "${psql[@]}" -d "$db" >>"$ORDERGATE_BENCH_EXPLAIN" 2>&1 <<SQL
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 1;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_nested_statements = on;
SET client_min_messages = log;
$stmt \g /dev/null
SQL
    fi
done
rm -rf "$work"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (wall times grow with it; CPU ms is" \
    "the backend's own user+system time per call, the server's share of the page)"
