#!/usr/bin/env bash
# examples/mall/run.sh: the whole example in one command. A database of its own with ordergate
# (ordergatectl migrate), the shop's tables (schema.sql) and hooks (hooks.sql); then a race: the
# Python and the Java order service place orders with short payment windows on a few hot SKUs,
# then both apply payment callbacks (on time, late, delivered twice, paid twice, wrong amount,
# for an unknown order) and manual closes while ordergate-scanner cancels overdue orders every
# second; at the end check.sql compares the shop's books with ordergate's and fails loudly on
# any mismatch, and `ordergate-scanner --reconcile` must find nothing.
#
#   examples/mall/run.sh [--require-db] [--kafka] [--sql SQL_FILE | --planted-bug SQL_FILE CHECK]
#                        [BUILD_DIR]
#                                                        (BUILD_DIR default: build/)
#
# PostgreSQL: libpq's environment (PGHOST, PGPORT, PGUSER, PGPASSWORD; a superuser that may
# create databases and roles), as deploy/local/services.sh exports it. When nothing answers there,
# it starts a throwaway PostgreSQL with services.sh and stops it at the end, unless --require-db
# (what ctest passes: the test fails when the database is not there). Missing binaries in
# BUILD_DIR are built. The JDBC driver is fetched once into ~/.cache/ordergate
# (services.sh fetch-pom).
#
# --kafka adds the second tier: the broker of ORDERGATE_BROKERS (topics of this run's own, so
# runs never share one), the setting schedule_cancels = 1 (place_order writes each order's cancel
# message in the order's own transaction), ordergate-consumer relaying those messages to the delay
# topic and cancelling on time (source timeout_consumer), the scanner behind it with a 3 s grace.
# --sql runs SQL_FILE (psql, as the superuser) in the prepared database instead of the race: the
# hook and privilege cases of tests/examples/mall_hooks.sql.
# --planted-bug applies SQL_FILE after hooks.sql (a broken hook) and turns the verdict around:
# exit 0 only when check.sql fails and names CHECK among the failed checks, while ordergate's own
# reconcile still passes (the bug is in the shop's books, which only the shop's check can see).
#
# Environment: MALL_ORDERS (orders per round, default 240), MALL_ROUNDS (default 2), MALL_SEED
# (default 1), MALL_KEEP=1 keeps the database and the work folder (plan, answers, logs) for a look
# afterwards.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
require_db=0 planted= expect_check= sql_file= kafka=0
if [ "${1:-}" = --require-db ]; then require_db=1; shift; fi
if [ "${1:-}" = --kafka ]; then kafka=1; shift; fi
if [ "${1:-}" = --sql ]; then
    [ $# -ge 2 ] && [ -f "$2" ] || { echo "usage: $0 [--require-db] --sql SQL_FILE [BUILD_DIR]" >&2; exit 2; }
    sql_file=$(realpath -- "$2")
    shift 2
fi
if [ "${1:-}" = --planted-bug ]; then
    [ $# -ge 3 ] && [ -f "$2" ] && [[ $3 =~ ^[a-z_]+$ ]] ||
        { echo "usage: $0 [--require-db] [--planted-bug SQL_FILE CHECK] [BUILD_DIR]" >&2; exit 2; }
    planted=$(realpath -- "$2") expect_check=$3
    shift 3
fi
if [ $# -gt 1 ] || [[ ${1:-} == -* ]]; then
    echo "usage: $0 [--require-db] [--kafka] [--sql SQL_FILE | --planted-bug SQL_FILE CHECK] [BUILD_DIR]" >&2
    exit 2
fi
build=$(realpath -m -- "${1:-$repo/build}")
orders=${MALL_ORDERS:-240}
rounds=${MALL_ROUNDS:-2}
seed=${MALL_SEED:-1}
[[ $orders =~ ^[0-9]+$ && $orders -ge 40 && $rounds =~ ^[1-9]$ && $seed =~ ^[0-9]+$ ]] ||
    { echo "mall: MALL_ORDERS must be a number >= 40, MALL_ROUNDS 1..9, MALL_SEED a number" >&2; exit 2; }
# The services run on Debian's python3 (python3-psycopg2), whatever python3 is first on PATH.
py=/usr/bin/python3
example=mall keep=${MALL_KEEP:-0}
. "$repo/examples/run_common.sh"

# ---- PostgreSQL, binaries, the JDBC driver -------------------------------------------------
example_prepare
command -v javac >/dev/null || die "javac not found (Debian: apt-get install openjdk-17-jdk-headless)"
jdbc=$("$repo/deploy/local/services.sh" fetch-pom "$here/pom.xml" "mall-jdbc-$(sha256sum "$here/pom.xml" | cut -c1-12)")
javac -d "$work/classes" -cp "$jdbc/*" "$here/Service.java"
java_cp="$jdbc/*:$work/classes"

# ---- The database: ordergate, the shop, its hooks, the catalogue ---------------------------
step "database $db: ordergatectl migrate, schema.sql, hooks.sql"
example_db_create
if [ -n "$planted" ]; then
    step "planting $planted"
    "${psql_q[@]}" -f "$planted"
fi
"$py" "$here/race.py" --orders "$orders" --rounds "$rounds" --seed "$seed" --out "$work/plan"
"${psql_q[@]}" <<EOF
\\copy mall.pms_sku_stock (id, sku_code, price, stock) FROM '$work/plan/skus.tsv'
INSERT INTO mall.sms_coupon (id, type, name, amount, min_point) VALUES (1, 0, '5 off', 5.00, 0);
\\copy mall.sms_coupon_history (coupon_id, member_id) FROM '$work/plan/coupons.tsv'
CREATE SCHEMA mall_race;
CREATE TABLE mall_race.initial_stock AS SELECT id AS sku_id, stock FROM mall.pms_sku_stock;
CREATE TABLE mall_race.answer (service text, action text, order_sn text, txn_no text,
                               amount_cents bigint, outcome text, first_outcome text);
EOF

if [ -n "$sql_file" ]; then
    step "running $sql_file instead of the race"
    "${psql_q[@]}" -f "$sql_file"
    exit 0
fi

example_kafka_start

# ---- The race --------------------------------------------------------------------------------
# The services work with exactly mall_app's privileges. Round r+1 is placed while round r is being
# paid and cancelled, so placements lock stock on the rows that cancel and payment hooks update.
svc_env=(env PGOPTIONS="-c role=mall_app")
place() { # $1 = round: both services at once, in the background
    "${svc_env[@]}" "$py" "$here/service.py" place "$work/plan/orders$1.tsv" >"$work/place$1_py.tsv" 2>"$work/place$1_py.log" &
    pids+=($!)
    "${svc_env[@]}" java -cp "$java_cp" Service place "$work/plan/orders$1.tsv" >"$work/place$1_java.tsv" 2>"$work/place$1_java.log" &
    pids+=($!)
}
pay() { # $1 = round
    "${svc_env[@]}" "$py" "$here/service.py" pay "$work/plan/calls$1.tsv" >"$work/pay$1_py.tsv" 2>"$work/pay$1_py.log" &
    pids+=($!)
    "${svc_env[@]}" java -cp "$java_cp" Service pay "$work/plan/calls$1.tsv" >"$work/pay$1_java.tsv" 2>"$work/pay$1_java.log" &
    pids+=($!)
}
wait_all() {
    local p
    for p in "${pids[@]}"; do wait "$p" || die "an order service failed (its log is below)"; done
    pids=()
}
step "round 1: placing $(wc -l <"$work/plan/orders1.tsv") orders, Python and Java at once"
place 1
wait_all
step "payments, closes and ordergate-scanner --every 1 --workers 2; later rounds placed meanwhile"
"$scanner" --db "dbname=$db" --every 1 --grace "$scanner_grace" --batch-size 20 --pause-ms 0 --workers 2 \
    >"$work/scanner.log" 2>&1 &
scanner_pid=$!
for r in $(seq 1 "$rounds"); do
    pay "$r"
    if [ "$r" -lt "$rounds" ]; then
        place $((r + 1))
        # The next round's callbacks look its orders up when they start: after its placement.
        for p in "${pids[@]: -2}"; do wait "$p" || die "an order service failed (its log is below)"; done
        pids=("${pids[@]:0:${#pids[@]}-2}")
    fi
done
wait_all
# Every payment window has closed by now or within seconds; the scanner sweeps the rest.
for _ in $(seq 1 $((300 + 10 * scanner_grace))); do
    pending=$("${psql_q[@]}" -At -c "SELECT count(*) FROM ordergate.orders WHERE status = 'pending_payment'")
    [ "$pending" = 0 ] && break
    sleep 0.1
done
kill -TERM "$scanner_pid"
wait "$scanner_pid" || die "ordergate-scanner --every exited with an error"
scanner_pid=
if [ -n "$consumer_pid" ]; then
    kill -TERM "$consumer_pid"
    wait "$consumer_pid" || die "ordergate-consumer exited with an error"
    consumer_pid=
fi
for f in "$work"/place*.log "$work"/pay*.log; do sed "s|^|$(basename "$f" .log): |" "$f"; done

# ---- The check -------------------------------------------------------------------------------
step "check: the shop's books against ordergate's"
cat "$work"/place*.tsv "$work"/pay*.tsv >"$work/answers.tsv"
"${psql_q[@]}" -c "\\copy mall_race.answer FROM '$work/answers.tsv'"
rc=0
"$scanner" --db "dbname=$db" --reconcile --dry-run >"$work/reconcile.log" 2>&1 || rc=$?
[ $rc = 0 ] || { cat "$work/reconcile.log"; die "ordergate-scanner --reconcile exited $rc (3: violations)"; }
if [ -z "$planted" ]; then
    "${psql_q[@]}" -P pager=off -v kafka=$kafka -f "$here/check.sql"
    step "done: the shop and ordergate agree"
    exit 0
fi
rc=0
"${psql_q[@]}" -P pager=off -v kafka=$kafka -f "$here/check.sql" >"$work/check.out" 2>&1 || rc=$?
cat "$work/check.out"
[ $rc != 0 ] || die "the planted bug went unnoticed: check.sql passed"
grep -Eq "checks failed: (.*, )?$expect_check=[1-9]" "$work/check.out" ||
    die "check.sql failed, but not on $expect_check"
step "done: check.sql caught the planted bug ($expect_check), ordergate's reconcile passed"
