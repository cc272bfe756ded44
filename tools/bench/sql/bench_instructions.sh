#!/usr/bin/env bash
# CPU instructions per gate call, counted by callgrind in a single-user PostgreSQL backend: a
# figure that does not move with the machine's load, to compare two versions of the schema
# (SCHEMA=<tree>/schema) where wall-clock rates on a shared 2-core machine swing by 2x.
#
#   tools/bench/sql/bench_instructions.sh payment|cancel|place [CALLS]     default CALLS 200
#
#   payment  claim_payment of an order's exact amount (outcome paid), one call per transaction
#   cancel   claim_cancel of 500 due orders (timeout_consumer), one batch per transaction; the
#            figure is per order, CALLS batches
#   place    place_order of two lines from 200 SKUs, no coupon, one per transaction
#
# A throwaway cluster under ${TMPDIR:-/tmp} (initdb as the user postgres when run as root) gets
# SCHEMA/install.sql, 40,000 pending orders with 1-3 lines (due an hour ahead, or a minute ago
# for cancel) and 20,000 old payments, then VACUUM ANALYZE. Two runs from that same data: WARM
# calls alone (plans cached, relcache built), then WARM + CALLS; the difference divided by CALLS
# is the figure, with fsync off (a commit's flush is the disk's, not the schema's). Needs
# valgrind (Debian: apt-get install valgrind) and PostgreSQL 15's binaries (PG_BINDIR).
#
# KEEP=<dir> keeps both runs' callgrind files there (<kind>-warm.callgrind: the warm-up alone;
# <kind>-<CALLS>.callgrind: warm-up and measured calls), to read where the instructions go, e.g.
# inclusive per function:
#   callgrind_annotate --inclusive=yes DIR/cancel-20.callgrind | head -60
# The measured calls' share of a function is its count in the second file less the first's.
set -euo pipefail

kind=${1:?usage: bench_instructions.sh payment|cancel|place [CALLS]}
calls=${2:-200}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
schema=${SCHEMA:-$(cd "$here/../../.." && pwd)/schema}
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
warm=50
first=100 # the first measured call's number: past the warm-up's orders
case $kind in
    payment | place) ;;
    cancel) warm=5 first=10 ;;
    *) echo "bench: unknown kind $kind (payment, cancel or place)" >&2; exit 2 ;;
esac
[[ $calls =~ ^[1-9][0-9]*$ ]] || { echo "bench: CALLS must be a positive integer" >&2; exit 2; }
# 40,000 orders: cancel batches of 500 after the warm-up's, payments after theirs.
[ "$kind" != cancel ] && max=39000 || max=70
[ "$calls" -le "$max" ] || { echo "bench: at most $max $kind calls (40,000 orders loaded)" >&2; exit 2; }
keep=${KEEP:-}
if [ -n "$keep" ]; then
    mkdir -p "$keep" && keep=$(cd "$keep" && pwd) || { echo "bench: cannot create KEEP=$KEEP" >&2; exit 2; }
fi
[ -r "$schema/install.sql" ] || { echo "bench: no $schema/install.sql" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench: valgrind not found (apt-get install valgrind)" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/og-bench-instr.XXXXXX")
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$1"; else bash -c "$1"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
cleanup() {
    as_pg "'$pgbin/pg_ctl' -D '$dir/data' -m immediate stop" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 10000))
as_pg "'$pgbin/initdb' -D '$dir/data' -A trust -U postgres >/dev/null"
as_pg "'$pgbin/pg_ctl' -D '$dir/data' -o '-p $port -k $dir -c listen_addresses=' -w start >/dev/null"
psql=(env PGHOST="$dir" PGPORT="$port" PGUSER=postgres PGOPTIONS="-c client_min_messages=warning"
      "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" -d postgres -c "CREATE DATABASE b" >/dev/null
(cd "$schema" && "${psql[@]}" -d b -f install.sql >/dev/null)
due="now() + interval '1 hour'"
[ "$kind" = cancel ] && due="now() - interval '1 minute'"
"${psql[@]}" -d b >/dev/null <<SQL
INSERT INTO ordergate.inventory (sku, available) SELECT 'SKU-' || g, 1000000000 FROM generate_series(1, 200) g;
INSERT INTO ordergate.orders (order_no, amount_cents, expire_at)
SELECT 'B' || g, 1000 + g % 9000, $due FROM generate_series(0, 39999) g;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'B' || g, 'SKU-' || ((g + k * 37) % 200 + 1), k FROM generate_series(0, 39999) g, generate_series(1, 1 + g % 3) k;
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome)
SELECT 'OLD' || g, 'OLD' || g, 100, 'c', 'paid' FROM generate_series(1, 20000) g;
VACUUM ANALYZE;
CHECKPOINT;
SQL
as_pg "'$pgbin/pg_ctl' -D '$dir/data' -w stop >/dev/null"
cp -a "$dir/data" "$dir/data0"

# The statements of calls FROM..TO, one per line: each its own transaction in single-user mode.
statements() {
    local g
    for ((g = $1; g <= $2; g++)); do
        case $kind in
            payment) echo "SELECT ordergate.claim_payment('B$g', 'T$g', $((1000 + g % 9000)), 'bench');" ;;
            cancel) echo "SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'B' || n FROM generate_series($((g * 500)), $((g * 500 + 499))) n), 'timeout_consumer');" ;;
            place) echo "SELECT ordergate.place_order('N$g', 1500, '[{\"sku\": \"SKU-$((g % 200 + 1))\", \"qty\": 1}, {\"sku\": \"SKU-$(((g + 7) % 200 + 1))\", \"qty\": 2}]'::jsonb, NULL, now() + interval '30 minutes');" ;;
        esac
    done
}
# Instructions of one single-user run of the warm-up calls and then N measured ones, from the
# data as loaded.
count() {
    rm -rf "$dir/data"
    cp -a "$dir/data0" "$dir/data"
    {
        statements 0 $((warm - 1))
        if [ "$1" -gt 0 ]; then statements "$first" $((first + $1 - 1)); fi
    } >"$dir/in.sql"
    as_pg "cd '$dir' && valgrind --tool=callgrind --callgrind-out-file='$dir/cg.out' '$pgbin/postgres' --single -D '$dir/data' -c fsync=off b <'$dir/in.sql' >/dev/null 2>'$dir/vg.err'"
    sed -n 's/^summary: //p' "$dir/cg.out"
    if [ -n "$keep" ]; then
        cp "$dir/cg.out" "$keep/$kind-$([ "$1" -gt 0 ] && echo "$1" || echo warm).callgrind"
    fi
    rm -f "$dir/cg.out"
}
base=$(count 0)
total=$(count "$calls")
per=$(((total - base) / calls))
[ "$kind" = cancel ] && per=$((per / 500))
echo "bench: $kind: $per instructions per $([ "$kind" = cancel ] && echo order || echo call)" \
    "($calls $([ "$kind" = cancel ] && echo "batches of 500" || echo calls) after $warm warm-up; schema $schema)"
