#!/usr/bin/env bash
# The gate in a flash sale's first minute: ORDERS orders placed through place_order on SKUS hot
# SKUs, due at once, no VACUUM or ANALYZE afterwards; then one session cancels them with
# claim_cancel in batches of BATCH, CALLS calls, each call timed (PostgreSQL switches a cached
# statement to its generic plan from a session's sixth call: look at calls 1-5 against 6+).
#
#   tools/bench/sql/bench_flash_sale.sh [ORDERS] [SKUS] [BATCH] [CALLS]     defaults 20000 40 500 15
#
# Prints every call's time, the slowest of calls 1-5 and of calls 6+, and reconcile()'s count
# (must be 0). Connection: libpq's environment, a role that may create databases (superuser on
# the throwaway cluster of deploy/local/services.sh). Uses and drops database og_bench_flash.
# SCHEMA_DIR=DIR measures another schema directory.
set -euo pipefail
orders=${1:-20000} skus=${2:-40} batch=${3:-500} calls=${4:-15}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
db=og_bench_flash
psql=(env PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1)
for n in "$orders" "$skus" "$batch" "$calls"; do
    [[ $n =~ ^[1-9][0-9]{0,7}$ ]] || { echo "bench_flash_sale: $n: expected a positive integer" >&2; exit 2; }
done
[ $((batch * calls)) -le "$orders" ] || { echo "bench_flash_sale: BATCH x CALLS exceeds ORDERS" >&2; exit 2; }

"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE template0"
trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT
# SCHEMA_DIR: another revision's schema for a comparison (its install.sql, or for 0.1.0 its
# numbered scripts in order).
schema=${SCHEMA_DIR:-$top/schema}
if [ -f "$schema/install.sql" ]; then
    "${psql[@]}" -d "$db" -f "$schema/install.sql" >/dev/null
else
    for f in "$schema"/[0-9][0-9][0-9]_*.sql; do "${psql[@]}" -d "$db" -f "$f" >/dev/null; done
fi
t0=$(date +%s.%N)
"${psql[@]}" -d "$db" >/dev/null <<SQL
SELECT ordergate.add_stock('SKU-' || i, 100000000) FROM generate_series(1, $skus) i;
SELECT ordergate.add_coupon('CP-' || i) FROM generate_series(1, $orders / 4 + 1) i;
DO \$\$ BEGIN
  FOR i IN 1..$orders LOOP
    PERFORM ordergate.place_order('F' || lpad(i::text, 8, '0'), 1000,
        jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (1 + i % $skus), 'qty', 1),
                          jsonb_build_object('sku', 'SKU-' || (1 + (i * 7) % $skus), 'qty', 2)),
        CASE WHEN i % 4 = 0 THEN 'CP-' || (i / 4) END, now() - interval '1 second');
  END LOOP;
END \$\$;
SQL
echo "placed $orders orders on $skus SKUs in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (place_order, one session)"
"${psql[@]}" -At -d "$db" -c "SELECT 'statistics of orders: ' || coalesce('analyzed at ' || last_autoanalyze::text, 'none') FROM pg_stat_user_tables WHERE relname = 'orders'"
times=$({
    echo '\timing on'
    for ((b = 0; b < calls; b++)); do
        echo "SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'F' || lpad(i::text, 8, '0') FROM generate_series($((b * batch + 1)), $((b * batch + batch))) i), 'timeout_scanner');"
    done
} | "${psql[@]}" -d "$db" 2>&1 | grep -o 'Time: [0-9.]*' | cut -d' ' -f2)
echo "claim_cancel, $batch orders per call, ms per call: $(echo $times | tr '\n' ' ')"
echo "slowest of calls 1-5: $(echo "$times" | head -n 5 | sort -g | tail -n 1) ms; slowest of calls 6+: $(echo "$times" | tail -n +6 | sort -g | tail -n 1) ms"
echo "reconcile violations: $("${psql[@]}" -At -d "$db" -c "SELECT sum(violations) FROM ordergate.reconcile()")"
