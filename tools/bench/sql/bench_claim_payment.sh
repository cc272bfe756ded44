#!/usr/bin/env bash
# Benchmark of ordergate.claim_payment, one payment per call as order services and the consumer
# make them, with durable commits (the server's synchronous_commit/fsync as configured).
#
#   tools/bench/sql/bench_claim_payment.sh [ORDERS] [CLIENTS]       defaults 50000 2
#
# Loads ORDERS pending orders (1-3 lines each over 200 hot SKUs, a coupon on every third, due in
# an hour) in a fresh database built with SCHEMA/install.sql (SCHEMA: default this tree's
# schema/; another tree's schema/ measures that version on the same server, in the same run),
# then pgbench pays each once with its exact amount through the four-argument call every
# version has (outcome paid), CLIENTS connections at once. Prints payments/s (wall clock), the
# latency of one call (p50, p99, max, from pgbench's per-transaction log), checks that every
# order is paid and that reconcile() is clean, and drops the database.
#
# Connection: libpq's environment; the role must create databases (superuser on a throwaway
# cluster).
set -euo pipefail

orders=${1:-50000}
clients=${2:-2}
. "$(dirname "${BASH_SOURCE[0]}")/bench_db.sh"

per_client=$((orders / clients))
[ "$per_client" -ge 1 ] || { echo "bench: ORDERS/CLIENTS must be >= 1" >&2; exit 2; }

bench_db_create pay
echo "bench: loading $orders pending orders (schema $schema)"
bench_db_load_orders "$orders" "1 hour" bench_pay

# The amount is the order's own (1000 + g % 9000), so every call is paid.
cat >"$work/pay.sql" <<'SQL'
SELECT outcome FROM (SELECT nextval('public.bench_pay') AS g) s,
       ordergate.claim_payment('B' || s.g, 'T' || s.g, 1000 + s.g % 9000, 'bench');
SQL

(cd "$work" && "$pgbin/pgbench" -n -f pay.sql -c "$clients" -j "$clients" -t "$per_client" -l \
    "$db" >pgbench.out 2>&1) || { cat "$work/pgbench.out"; exit 1; }
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.out")
# pgbench_log.*: client, transaction, latency in microseconds, ...
lat=$(cat "$work"/pgbench_log.* | awk '{print $3}' | sort -n | awk '
    { v[NR] = $1 } END { printf "p50 %.2f ms, p99 %.2f ms, max %.2f ms", v[int(NR * 0.5)] / 1000,
                         v[int(NR * 0.99)] / 1000, v[NR] / 1000 }')
done_n=$((per_client * clients))
echo "bench: claim_payment, $clients client(s): $(printf '%.0f' "$tps") payments/s wall clock; call $lat"
echo "bench: load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

paid=$("${psql[@]}" -d "$db" -At -c "SELECT count(*) FROM ordergate.orders WHERE status = 'paid'")
[ "$paid" -eq "$done_n" ] || { echo "bench: FAIL expected $done_n paid, got $paid" >&2; exit 1; }
viol=$("${psql[@]}" -d "$db" -At -c "SELECT sum(violations) FROM ordergate.reconcile()")
echo "bench: $paid orders paid; reconcile() violations $viol"
[ "$viol" = "0" ] || { "${psql[@]}" -d "$db" -c "SELECT * FROM ordergate.reconcile() WHERE violations > 0"; exit 1; }
