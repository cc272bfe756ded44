#!/usr/bin/env bash
# Benchmark of ordergate.claim_cancel with all its side effects and durable commits (the server's
# synchronous_commit/fsync as configured; nothing is relaxed here).
#
#   tools/bench/sql/bench_claim_cancel.sh [ORDERS] [BATCH] [CLIENTS]      defaults 200000 500 1
#
# Loads ORDERS due pending orders (1-3 lines each over 200 hot SKUs, a coupon on every third) in
# a fresh database built with SCHEMA/install.sql (SCHEMA: default this tree's schema/; see
# tools/bench/sql/bench_db.sh), then pgbench cancels them in batches of BATCH order numbers drawn
# from a sequence (every batch cancels BATCH distinct orders: no easy not_found rows), CLIENTS
# connections at once. Prints orders/s (wall clock) and orders per CPU-second of the whole
# PostgreSQL cluster and per CPU-second of the pgbench backends alone (meaningful on a shared, busy
# machine where wall clock depends on others' load), checks every order is cancelled and that
# reconcile() is clean, times reconcile(), and drops the database.
#
# Connection: libpq's environment; the role must create databases (superuser on a throwaway
# cluster). CPU accounting reads /proc of the postmaster's children, so run it on the server host.
set -euo pipefail

orders=${1:-200000}
batch=${2:-500}
clients=${3:-1}
. "$(dirname "${BASH_SOURCE[0]}")/bench_db.sh"

batches=$((orders / batch))
per_client=$((batches / clients))
[ "$per_client" -ge 1 ] || { echo "bench: ORDERS/BATCH/CLIENTS must be >= 1" >&2; exit 2; }

bench_db_create cancel
echo "bench: loading $orders due orders"
bench_db_load_orders "$orders" "-1 minute" bench_batch

cat >"$work/cancel.sql" <<EOF
SELECT count(*) FROM ordergate.claim_cancel(
  (SELECT array_agg('B' || g) FROM (SELECT nextval('public.bench_batch') AS k) s,
          generate_series(s.k * $batch, s.k * $batch + $batch - 1) g),
  'timeout_consumer');
EOF

# CPU ticks of the cluster: the postmaster's own and its reaped children's (cutime, cstime: a
# backend that exited is counted there), plus its live children's.
datadir=$("${psql[@]}" -d "$db" -At -c 'SHOW data_directory')
postmaster=$(head -1 "$datadir/postmaster.pid")
cluster_ticks() {
    local t p
    t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat")
    for p in $(pgrep -P "$postmaster"); do
        [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
hz=$(getconf CLK_TCK)

t0=$(cluster_ticks)
"$pgbin/pgbench" -n -f "$work/cancel.sql" -c "$clients" -j "$clients" -t "$per_client" "$db" >"$work/pgbench.out" 2>&1 &
bench_pid=$!
# The pgbench backends' own CPU, sampled until they finish (the last sample misses at most ~0.2 s).
declare -A backend_ticks=()
while kill -0 "$bench_pid" 2>/dev/null; do
    for p in $("${psql[@]}" -d postgres -At -c \
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$db'" 2>/dev/null); do
        v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && backend_ticks[$p]=$v
    done
    sleep 0.2
done
wait "$bench_pid" || { cat "$work/pgbench.out"; exit 1; }
sleep 1  # let the postmaster reap the exited backends (their CPU lands in its cutime)
t1=$(cluster_ticks)
bt=0; for v in "${backend_ticks[@]}"; do bt=$((bt + v)); done
grep -E "latency average|tps =" "$work/pgbench.out"

tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.out")
done_orders=$((per_client * clients * batch))
cpu_s=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
echo "bench: claim_cancel batch $batch, $clients client(s): $(awk -v t="$tps" -v b="$batch" 'BEGIN { printf "%.0f", t * b }') orders/s wall clock"
bcpu_s=$(awk -v t="$bt" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')
echo "bench: cluster CPU $cpu_s s for $done_orders orders: $(awk -v c="$cpu_s" -v n="$done_orders" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "n/a" }') orders per CPU-second (all server processes)"
echo "bench: backend CPU $bcpu_s s: $(awk -v c="$bcpu_s" -v n="$done_orders" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "n/a" }') orders per backend CPU-second"
echo "bench: load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

"${psql[@]}" -d "$db" -At -F ' ' -c \
    "SELECT 'bench: orders by status:', string_agg(status || '=' || n, ' ') FROM (SELECT status, count(*) AS n FROM ordergate.orders GROUP BY status ORDER BY status) s"
cancelled=$("${psql[@]}" -d "$db" -At -c "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'")
[ "$cancelled" -eq "$done_orders" ] || { echo "bench: FAIL expected $done_orders cancelled, got $cancelled" >&2; exit 1; }
start=$(date +%s.%N)
viol=$("${psql[@]}" -d "$db" -At -c "SELECT sum(violations) FROM ordergate.reconcile()")
end=$(date +%s.%N)
echo "bench: reconcile() on $orders orders: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s, violations $viol"
[ "$viol" = "0" ] || { "${psql[@]}" -d "$db" -c "SELECT * FROM ordergate.reconcile() WHERE violations > 0"; exit 1; }
