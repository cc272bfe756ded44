#!/usr/bin/env bash
# Runs `ordergatectl drill` in a database of its own and checks the verdict.
#
#   run_drill.sh BUILD_DIR expect-clean|expect-violations [--planted-bug|--planted-money|--planted-life] [--pgbouncer] -- DRILL_ARGS...
#
# --planted-bug: the cancel restocks before it claims (planted_bug.sql): reconcile's stock
# invariant (2) must catch it. --planted-money: the cancel forgets the captured parts of the
# orders it cancels (planted_bug_money.sql): the ledger and reconcile's invariant 12 must.
# --planted-life: a staff release gives the order's stock back (planted_bug_life.sql): the
# ledger's shelf count and reconcile's stock invariant (2) must catch it.
#
# --pgbouncer: the drill and every process it starts reach the database through the
# transaction-pooling PgBouncer of deploy/local/services.sh (ORDERGATE_PGBOUNCER_PORT; fails
# when it is not set) with --pool-mode transaction; the setup here stays direct.
#
# expect-clean: exit 0 and "violations":0 in the JSON report, and the money mix ran.
# expect-violations: exit 1 and a positive violation count (the drill caught the bug).
set -euo pipefail
build=$1 expect=$2
shift 2
planted=
if [ "${1:-}" = --planted-bug ]; then planted=planted_bug.sql; shift; fi
if [ "${1:-}" = --planted-money ]; then planted=planted_bug_money.sql; shift; fi
if [ "${1:-}" = --planted-life ]; then planted=planted_bug_life.sql; shift; fi
via=direct
if [ "${1:-}" = --pgbouncer ]; then via=pgbouncer; shift; fi
[ "${1:-}" = -- ] && shift
here=$(cd "$(dirname "$0")" && pwd)
db="og_drill_$$"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
report=$(mktemp)
cleanup() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true; rm -f "$report"; }
trap cleanup EXIT

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db TEMPLATE $tpl"
if [ -n "$planted" ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$here/$planted"
fi
conn=(--db "dbname=$db")
if [ $via = pgbouncer ]; then
    if [ -z "${ORDERGATE_PGBOUNCER_PORT:-}" ]; then
        echo "run_drill.sh: --pgbouncer needs ORDERGATE_PGBOUNCER_PORT (services.sh with pgbouncer)" >&2
        exit 1
    fi
    conn=(--db "host=127.0.0.1 port=$ORDERGATE_PGBOUNCER_PORT dbname=$db" --pool-mode transaction)
fi
set +e
"$build/tools/ordergatectl" drill "${conn[@]}" --json "$@" >"$report"
rc=$?
set -e
cat "$report"
violations=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["violations"])' "$report" 2>/dev/null || echo missing)
echo "drill exit $rc, violations $violations"
case $expect in
    expect-clean)
        [ $rc -eq 0 ] && [ "$violations" = 0 ] || exit 1
        # The money mix and the staff acts ran (every clean drill here keeps its defaults): three
        # currencies with orders in each, orders paid in parts, charges pending at the deadline,
        # payments in another currency, releases, amendments and deadline changes; else a clean
        # verdict would prove nothing about them.
        python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
checks = [
    ("three currencies, orders in each",
     len(r["currencies"]) >= 3 and all(c["placed"] > 0 for c in r["currencies"].values())),
    ("orders paid in parts", r["parts_orders"] > 0),
    ("charges pending at the deadline", r["charges_begun"] > 0),
    ("payments in another currency", r["currency_mismatches"] > 0),
    # and the staff acts: releases that won, amendments, deadlines moved
    ("releases by staff", r["releases"] > 0),
    ("amendments by staff", r["amendments"] > 0),
    ("deadlines moved by staff", r["deadlines_moved"] > 0),
    # The consumer's lateness split by whether the order's due time moved after its message
    # was written (a later deadline, a charge pending at it): the parts add up, and a drill
    # whose charges failed has such orders (a failed charge's order is cancelled by a trigger).
    ("consumer lateness split adds up",
     r["lateness_consumer_due_kept"]["count"] + r["lateness_consumer_due_moved"]["count"]
     == r["lateness_consumer"]["count"]),
    ("orders whose due time moved counted",
     r["charges_failed"] == 0 or r["lateness_consumer_due_moved"]["count"]
     + r["lateness_scanner"]["count"] > 0),
]
bad = [name for name, ok in checks if not ok]
for name in bad:
    print("money mix check failed:", name, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
        # With the database scheduling (--schedule-in-db) the counts must show the relays at
        # work, whatever the drill concluded: every message not lost went out and reached the
        # delay topics, the consumers cancelled, the scanner at most the lost ones.
        python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("scheduling") != "database":
    sys.exit(0)
on_topics = sum(r["delay_topics"].values())
checks = [
    ("an event per order and per moved hold", r["cancel_events"] >= r["placed"]),
    ("every event published", r["unpublished_events"] == 0),
    ("the relays sent every message not lost", r["messages"] >= r["placed"] - r["lost_messages"]),
    ("the delay topics hold what the relays sent", on_topics >= r["messages"]),
    ("the consumers cancelled", r["cancelled_consumer"] > 0),
    ("the scanner cancelled only lost orders", r["cancelled_scanner"] <= r["lost_messages"]),
    ("the drill produced nothing itself", r["duplicate_messages"] == 0),
    # Payment reminders (--reminders 3,1 by default): written at placement, sent by the
    # consumers; reconcile's invariants 17 and 18 say none went out late or twice.
    ("reminders written", r.get("reminders", {}).get("written", 0) > 0),
    ("reminders sent by the consumers", r.get("reminders", {}).get("sent", 0) > 0),
]
bad = [name for name, ok in checks if not ok]
for name in bad:
    print("schedule-in-db check failed:", name, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
        ;;
    expect-violations)
        # The planted bug restocks goods of orders it did not win: the stock invariant (2)
        # must be the one that catches it. The planted money bug leaves captured parts of
        # cancelled orders without their cancelled_part exception: the ledger and invariant 12
        # must both catch it.
        invariant=2 ledger=0
        if [ "$planted" = planted_bug_money.sql ]; then invariant=12 ledger=1; fi
        [ $rc -eq 1 ] && [ "$violations" != missing ] && [ "$violations" -gt 0 ] &&
            python3 - "$report" $invariant $ledger <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
inv, need_ledger = int(sys.argv[2]), sys.argv[3] == "1"
caught = [x for x in r["reconcile"] if x["invariant"] == inv][0]["violations"] > 0
if not caught:
    print("expect-violations: reconcile's invariant %d did not catch it" % inv, file=sys.stderr)
if need_ledger and r["ledger_violations"] == 0:
    print("expect-violations: the drill's ledger did not catch it", file=sys.stderr)
    caught = False
sys.exit(0 if caught else 1)
PY
        ;;
    *)
        echo "unknown expectation $expect" >&2; exit 2 ;;
esac
