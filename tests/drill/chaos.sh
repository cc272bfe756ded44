#!/usr/bin/env bash
# drill_chaos: the drill with Toxiproxy between every ordergate program (the consumers with their
# relays, the scanner, the drill's own payers and looks) and both PostgreSQL and the Kafka
# broker, and a fault plan (ordergatectl drill --faults) that stalls, silences and resets them
# in the middle of the race.
#
#   chaos.sh BUILD_DIR [--long] [DRILL_ARGS...]
#
# The database schedules the cancels (--schedule-in-db), the relays publish them. Extra
# DRILL_ARGS go to the drill (--no-kafka: the scanner alone, repeating every second, meets the
# database's faults). Short (ctest): 2000 orders due over 80 s, tests/drill/faults/ci.plan (the broker lost for 8 s,
# the database silent for 32 s, connections reset as claims and commits come back). --long (by
# hand): 10,000 orders over 9 min, tests/drill/faults/local.plan (latency with jitter, blackholes,
# resets, a bandwidth limit and slow closes, on the database and the broker). ORDERGATE_CHAOS_PLAN
# names another plan.
#
# Passes when the drill reports 0 violations (its ledger reads a repeated call by its first
# outcome; reconcile), every fault was applied and cleared, no consumer was restarted or exited
# (they recovered by themselves), the consumers cancelled every order (no message is lost on
# purpose: --loss-ratio 0, so the scanner's final sweep finds nothing) including orders due in
# the 30 s after each fault. Prints what each fault did to lateness (the drill's report).
#
# Toxiproxy comes from deploy/local/toxiproxy.sh (built with the Go toolchain when missing; the
# test fails when it cannot get it). Uses the test suite's PostgreSQL (a database of its own from
# the template) through a proxy, and starts its own broker, which advertises the proxy's port, in
# a state directory of its own, removed at the end.
set -euo pipefail
build=$1 mode=short
shift
[ "${1:-}" != --long ] || { mode=long; shift; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
plans=$repo/tests/drill/faults
services=$repo/deploy/local/services.sh
toxiproxy=$repo/deploy/local/toxiproxy.sh
ctl=$build/tools/ordergatectl

fail() { echo "drill_chaos: FAIL: $*" >&2; exit 1; }
note() { echo "drill_chaos: $*"; }

[ -n "${PGPORT:-}" ] || fail "PGPORT is not set: the test suite's PostgreSQL is needed"
work=$(mktemp -d "${TMPDIR:-/tmp}/og-chaos.XXXXXX")
db="og_chaos_$$"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
drill_pid=
cleanup() {
    # ORDERGATE_CHAOS_KEEP=DIR: the drill's report and log kept there (for docs/results).
    if [ -n "${ORDERGATE_CHAOS_KEEP:-}" ]; then
        mkdir -p "$ORDERGATE_CHAOS_KEEP" && cp "$work"/report.json "$work"/drill.log "$ORDERGATE_CHAOS_KEEP"/ 2>/dev/null || true
    fi
    [ -z "$drill_pid" ] || kill -TERM "$drill_pid" 2>/dev/null || true
    [ -z "$drill_pid" ] || wait "$drill_pid" 2>/dev/null || true
    # Toxiproxy first: services.sh down removes the state directory with its pid file.
    ORDERGATE_STATE_DIR=$work/services "$toxiproxy" down >/dev/null 2>&1 || true
    ORDERGATE_STATE_DIR=$work/services "$services" down >/dev/null 2>&1 || true
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

bin=$("$toxiproxy" install) || fail "cannot get Toxiproxy (deploy/local/toxiproxy.sh install)"
export PATH=$bin:$PATH
export ORDERGATE_STATE_DIR=$work/services
eval "$("$toxiproxy" up)" || fail "the Toxiproxy server did not start"
export TOXIPROXY_URL=http://$ORDERGATE_TOXIPROXY

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pg_proxy=$(free_port)
kafka_port=$(free_port)
kafka_proxy=$(free_port)
toxiproxy-cli create --listen "127.0.0.1:$pg_proxy" --upstream "127.0.0.1:$PGPORT" og_pg >/dev/null ||
    fail "cannot create the database's proxy"
toxiproxy-cli create --listen "127.0.0.1:$kafka_proxy" --upstream "127.0.0.1:$kafka_port" og_kafka >/dev/null ||
    fail "cannot create the broker's proxy"

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db TEMPLATE $tpl"
q() { psql -X -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }

# The broker listens on kafka_port and advertises the proxy's, so every client reconnects
# through the proxy. A JVM on a loaded 2-core machine: two minutes to answer.
t0=$SECONDS
ORDERGATE_SERVICES=kafka ORDERGATE_KAFKA_NODES=1 ORDERGATE_KAFKA_PORT=$kafka_port \
    ORDERGATE_KAFKA_ADVERTISED_PORT=$kafka_proxy ORDERGATE_START_TIMEOUT=${ORDERGATE_START_TIMEOUT:-120} \
    "$services" up >/dev/null || fail "the broker did not start"
note "broker up in $((SECONDS - t0)) s; database 127.0.0.1:$pg_proxy -> :$PGPORT, broker 127.0.0.1:$kafka_proxy -> :$kafka_port"

# The database schedules the cancels (as in production with schedule_cancels = 1): the relays
# publish them to the delay topics by level, through the proxy, so no partition holds an order
# due now behind one due minutes later. --lead-ms counts from the start of placement.
if [ $mode = long ]; then
    plan=${ORDERGATE_CHAOS_PLAN:-$plans/local.plan}
    args=(--orders 10000 --consumers 2 --lead-ms 90000 --spread-ms 540000 --jitter-ms 1500 --settle-s 180)
else
    plan=${ORDERGATE_CHAOS_PLAN:-$plans/ci.plan}
    args=(--orders 2000 --consumers 2 --lead-ms 25000 --spread-ms 80000 --jitter-ms 1500 --settle-s 90)
fi
# ORDERGATE_CHAOS_CONFIG=FILE: the configuration of the drill and the programs it starts
# (database.retry_max, for one).
config=()
[ -z "${ORDERGATE_CHAOS_CONFIG:-}" ] || config=(--config "$ORDERGATE_CHAOS_CONFIG")
sched=(--schedule-in-db)
case " $* " in *" --no-kafka "*) sched=() ;; esac
conninfo="host=127.0.0.1 port=$pg_proxy dbname=$db user=${PGUSER:-postgres}"
t0=$SECONDS
"$ctl" "${config[@]}" drill --db "$conninfo" --brokers "127.0.0.1:$kafka_proxy" --json "${sched[@]}" --loss-ratio 0 \
    --seed 24 --faults "$plan" "${args[@]}" "$@" >"$work/report.json" 2>"$work/drill.log" &
drill_pid=$!
set +e
wait "$drill_pid"
rc=$?
set -e
drill_pid=
note "drill: exit $rc in $((SECONDS - t0)) s"
grep -E 'fault |did not stop|ordergatectl drill:' "$work/drill.log" | sed 's/^/drill_chaos:   /' || true

report=$work/report.json
python3 - "$report" <<'EOF' || { tail -n 40 "$work/drill.log" >&2; fail "the drill's report says the run did not hold (exit $rc)"; }
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
lc = r["lateness_scanner" if r["trigger"] == "scanner" else "lateness_consumer"]
print("drill_chaos: %d orders, %d violations, %.0f s; trigger lateness p50 %.0f p99 %.0f max %.0f ms; "
      "scanner cancels %d; gate calls repeated %d; consumer restarts %d"
      % (r["placed"], r["violations"], r["seconds"], lc["p50_ms"], lc["p99_ms"], lc["max_ms"],
         r["cancelled_scanner"], r["repeated_calls"], r["consumer_restarts"]))
f = r["faults"]
print("drill_chaos: normal lateness (p99 of the orders due in the 30 s before the first fault, at least 1 s): %.0f ms" % f["normal_p99_ms"])
for x in f["faults"]:
    if not x["applied"] or x["apply_exit"] != 0 or x["clear_exit"] != 0:
        bad.append("%s: applied %s, apply exit %d, clear exit %d" % (x["name"], x["applied"], x["apply_exit"], x["clear_exit"]))
        continue
    d, a = x["due_during"], x["due_after"]
    n = x["normal_after_s"]
    print("drill_chaos: fault %-16s T%+.1f s for %.1f s; due during: n=%d p50 %.0f p99 %.0f max %.0f ms; "
          "due in the 30 s after: n=%d p50 %.0f p99 %.0f max %.0f ms; normal again %s"
          % (x["name"], x["applied_at_s"], x["lasted_s"], d["count"], d["p50_ms"], d["p99_ms"], d["max_ms"],
             a["count"], a["p50_ms"], a["p99_ms"], a["max_ms"],
             "%.1f s after it cleared" % n if n is not None else "not within 30 s"))
    if a["count"] == 0:
        bad.append("%s: no order due in the 30 s after it was cancelled by the trigger" % x["name"])
if r["violations"] != 0:
    bad.append("%d violations" % r["violations"])
if r["pending"] != 0:
    bad.append("%d orders left pending" % r["pending"])
# With --no-kafka the scanner, repeating every second, is the trigger whose recovery counts.
if r["trigger"] != "scanner" and r["cancelled_scanner"] != 0:
    bad.append("the consumers left %d orders to the scanner's final sweep" % r["cancelled_scanner"])
if r["consumer_restarts"] != 0:
    bad.append("consumers restarted")
for b in bad:
    print("drill_chaos: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
[ $rc -eq 0 ] || { tail -n 40 "$work/drill.log" >&2; fail "drill exit $rc"; }
if grep -q 'did not stop cleanly' "$work/drill.log"; then
    fail "a consumer had exited or hung before the end (it did not recover by itself)"
fi
# The proxies are whole again: no toxic left, both enabled.
left=$(curl -fsS "$TOXIPROXY_URL/proxies" | python3 -c 'import json,sys; p=json.load(sys.stdin); print(sum(len(v["toxics"]) for v in p.values()) + sum(not v["enabled"] for v in p.values()))')
[ "$left" = 0 ] || fail "the plan left $left toxics or disabled proxies behind"
note "passed"
