#!/usr/bin/env bash
# examples/saleor/run.sh: the whole example in one command. A database of its own with ordergate
# (ordergatectl migrate), Saleor's tables (schema.sql), the shop's hooks (hooks.sql) and checks
# (checks.sql); then the race (race.py: Saleor's order service places orders in four currencies
# and plays every payment story while ordergate-scanner cancels overdue orders every second);
# at the end `ordergate-scanner --reconcile` (ordergate's invariants and the shop's registered
# checks) and verify.sql must find nothing.
#
#   examples/saleor/run.sh [--require-db] [--kafka] [--planted-bug SQL_FILE CHECK] [BUILD_DIR]
#                                                        (BUILD_DIR default: build/)
#
# PostgreSQL: libpq's environment (a superuser that may create databases and roles), as
# deploy/local/services.sh exports it; when nothing answers there, a throwaway one is started
# and stopped at the end, unless --require-db (what ctest passes). Missing binaries are built.
# --kafka adds the second tier, as examples/mall/run.sh --kafka does: the broker of
# ORDERGATE_BROKERS (topics of this run's own), schedule_cancels = 1, ordergate-consumer relaying
# the cancel (and reminder) messages place_order writes and claiming them on time, the scanner
# behind it with a 3 s grace.
# --planted-bug applies SQL_FILE after hooks.sql (a broken hook) and turns the verdict around:
# exit 0 only when verify.sql fails naming CHECK, ordergate's built-in invariants pass, and
# `ordergate-scanner --reconcile` fails on the shop's check shop:CHECK (once the gate has
# add_check): the shop's books are in the daily proof.
#
# Environment: SALEOR_ORDERS (default 180), SALEOR_SEED (default 1), SALEOR_KEEP=1 keeps the
# database and the work folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
require_db=0 planted= expect_check= kafka=0
if [ "${1:-}" = --require-db ]; then require_db=1; shift; fi
if [ "${1:-}" = --kafka ]; then kafka=1; shift; fi
if [ "${1:-}" = --planted-bug ]; then
    [ $# -ge 3 ] && [ -f "$2" ] && [[ $3 =~ ^[a-z_]+$ ]] ||
        { echo "usage: $0 [--require-db] [--kafka] [--planted-bug SQL_FILE CHECK] [BUILD_DIR]" >&2; exit 2; }
    planted=$(realpath -- "$2") expect_check=$3
    shift 3
fi
if [ $# -gt 1 ] || [[ ${1:-} == -* ]]; then
    echo "usage: $0 [--require-db] [--kafka] [--planted-bug SQL_FILE CHECK] [BUILD_DIR]" >&2
    exit 2
fi
build=$(realpath -m -- "${1:-$repo/build}")
orders=${SALEOR_ORDERS:-180}
seed=${SALEOR_SEED:-1}
[[ $orders =~ ^[0-9]+$ && $orders -ge 60 && $seed =~ ^[0-9]+$ ]] ||
    { echo "saleor: SALEOR_ORDERS must be a number >= 60, SALEOR_SEED a number" >&2; exit 2; }
py=/usr/bin/python3
example=saleor keep=${SALEOR_KEEP:-0}
. "$repo/examples/run_common.sh"

example_prepare

step "database $db: ordergatectl migrate, schema.sql, hooks.sql, checks.sql"
example_db_create
"${psql_q[@]}" -f "$here/checks.sql" >/dev/null
if [ -n "$planted" ]; then
    step "planting $planted"
    "${psql_q[@]}" -f "$planted" >/dev/null
fi
"${psql_q[@]}" <<'EOF'
CREATE SCHEMA saleor_race AUTHORIZATION saleor;
SET ROLE saleor;
CREATE TABLE saleor_race.answer (action text, order_no text, txn_no text, minor bigint,
                                 currency text, outcome text, first_outcome text);
CREATE TABLE saleor_race.run (life boolean NOT NULL);
EOF
# Payment reminders one second before each deadline, when the gate has them.
"${psql_q[@]}" -At -c "SELECT ordergate.set_setting('reminder_before_seconds', '1')
                        WHERE to_regclass('ordergate.reminders') IS NOT NULL" >/dev/null
checks=f
if [ "$("${psql_q[@]}" -At -c "SELECT to_regclass('ordergate.checks') IS NOT NULL")" = t ]; then
    checks=$("${psql_q[@]}" -At -c "SELECT count(*) = 4 FROM ordergate.checks")
fi

example_kafka_start

step "the race: $orders orders, ordergate-scanner --every 1 --workers 2 --grace $scanner_grace"
"$scanner" --db "dbname=$db" --every 1 --grace "$scanner_grace" --batch-size 20 --pause-ms 0 --workers 2 \
    >"$work/scanner.log" 2>&1 &
scanner_pid=$!
# The service works with exactly the privileges of the shop's one role.
PGOPTIONS="-c role=saleor" "$py" "$here/race.py" --orders "$orders" --seed "$seed" 2>"$work/race.log" ||
    die "race.py failed (its log is below)"
sed 's/^/race.log: /' "$work/race.log"
kill -TERM "$scanner_pid"
wait "$scanner_pid" || die "ordergate-scanner --every exited with an error"
scanner_pid=
if [ -n "$consumer_pid" ]; then
    kill -TERM "$consumer_pid"
    wait "$consumer_pid" || die "ordergate-consumer exited with an error"
    consumer_pid=
fi

step "check: ordergate-scanner --reconcile and verify.sql"
rc=0
"$scanner" --db "dbname=$db" --reconcile --dry-run >"$work/reconcile.log" 2>&1 || rc=$?
vrc=0
"${psql_q[@]}" -P pager=off -v kafka=$kafka -f "$here/verify.sql" >"$work/verify.out" 2>&1 || vrc=$?
cat "$work/verify.out"
if [ -z "$planted" ]; then
    [ $rc = 0 ] || { cat "$work/reconcile.log"; die "ordergate-scanner --reconcile exited $rc (3: violations)"; }
    [ $vrc = 0 ] || die "verify.sql failed"
    step "done: the shop and ordergate agree (shop checks registered in the gate: $checks)"
    exit 0
fi
[ $vrc != 0 ] || die "the planted bug went unnoticed: verify.sql passed"
grep -Eq "checks failed: (.*, )?$expect_check=[1-9]" "$work/verify.out" ||
    die "verify.sql failed, but not on $expect_check"
grep -Eq "checks failed: (.*, )?reconcile=" "$work/verify.out" &&
    die "ordergate's own invariants failed too: the planted bug is not the shop's alone"
if [ "$checks" = t ]; then
    [ $rc = 3 ] && grep -q "shop:$expect_check" "$work/reconcile.log" ||
        { cat "$work/reconcile.log"; die "ordergate-scanner --reconcile did not fail on shop:$expect_check (exit $rc)"; }
    step "done: the shop's check caught the planted bug in verify.sql and in ordergate-scanner --reconcile"
else
    [ $rc = 0 ] || { cat "$work/reconcile.log"; die "ordergate-scanner --reconcile exited $rc"; }
    step "done: verify.sql caught the planted bug ($expect_check); no shop checks registered in the gate"
fi
