#!/usr/bin/env bash
# What one order a hook fails costs a sweep: ordergate-scanner over N overdue orders (pages of
# 500) with the test hook of tests/support/failing_hook.sql registered, once with the hook working
# and once with it failing one order (isolated by bisection, docs/consumer.md, "When a hook
# fails"), ROUNDS times in turn. Prints each run's cancelled, hook_failed and duration_ms.
#
#   tools/bench/hook_isolation.sh [BUILD_DIR]          # default build/
#   ORDERS=2000 ROUNDS=3 tools/bench/hook_isolation.sh
#
# Needs PostgreSQL as for the tests (eval "$(deploy/local/services.sh up)") and the template
# database (tests/support/db_template.sh, run here).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
orders=${ORDERS:-2000}
rounds=${ROUNDS:-3}
scanner=$build/scanner/ordergate-scanner
[[ -x $scanner ]] || { echo "hook_isolation.sh: $scanner not built" >&2; exit 2; }
"$repo/tests/support/db_template.sh" >/dev/null
psql=(psql -X -q -v ON_ERROR_STOP=1)
echo "hook_isolation.sh: $orders overdue orders, pages of 500; commit" \
    "$(git -C "$repo" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
    for failing in none one; do
        db=og_hook_isolation_$$
        "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" \
            -c "CREATE DATABASE $db TEMPLATE ordergate_tpl" 2>/dev/null
        "${psql[@]}" -d "$db" -f "$repo/tests/support/failing_hook.sql" >/dev/null
        "${psql[@]}" -d "$db" -v n="$orders" >/dev/null <<'SQL'
SELECT ordergate.add_stock('SKU-A', 1000000);
SELECT ordergate.place_order('HI-' || g, 1000, '[{"sku":"SKU-A","qty":1}]', NULL,
                             now() - interval '1 hour' + g * interval '1 ms')
  FROM generate_series(1, :n) g;
SQL
        if [[ $failing == one ]]; then
            "${psql[@]}" -d "$db" -c "INSERT INTO shop_t.poison VALUES ('HI-$((orders / 3))')"
        fi
        line=$("$scanner" --db "dbname=$db" --grace 0 --batch-size 500 --pause-ms 0 2>&1 |
            grep 'event=scanner_run_done')
        printf 'round %d, hook failing %-4s %s %s %s\n' "$round" "$failing" \
            "$(grep -o ' cancelled=[0-9]*' <<<"$line")" "$(grep -o 'hook_failed=[0-9]*' <<<"$line")" \
            "$(grep -o 'duration_ms=[0-9]*' <<<"$line")"
        "${psql[@]}" -d postgres -c "DROP DATABASE $db"
    done
done
