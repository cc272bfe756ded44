#!/usr/bin/env bash
# drill_failover: the drill on a primary with a synchronous streaming standby; in the middle of
# the race the primary is SIGKILLed (postmaster and backends at once, as a crashed host) and the
# standby, whose replay lags behind on purpose, is promoted. The drill, its consumers (with their
# outbox relays) and its scanner reach the database only through a multi-host conninfo with
# target_session_attrs=read-write, so they find the new primary by reconnecting.
#
#   failover.sh BUILD_DIR [DRILL_ARGS...]
#
# Passes when the drill's reconciliation and its ledger of every answer the gate gave report 0
# violations on the promoted server (no acknowledged claim or payment lost, none applied twice),
# the promoted server's own reconciliation over everything is clean, the standby was behind in
# replay when the primary died, and the failover really happened in the race (gate calls were
# repeated across it, and the consumers said so in db_reconnected lines).
#
# Needs the test suite's Kafka (ORDERGATE_BROKERS); starts its own pair of PostgreSQL servers
# with deploy/local/services.sh in a state directory of its own, and removes them at the end.
set -euo pipefail
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
services=$repo/deploy/local/services.sh
ctl=$build/tools/ordergatectl

fail() { echo "drill_failover: FAIL: $*" >&2; exit 1; }
[ -n "${ORDERGATE_BROKERS:-}" ] || fail "ORDERGATE_BROKERS is not set (the test suite's Kafka)"

work=$(mktemp -d "${TMPDIR:-/tmp}/og-failover.XXXXXX")
export ORDERGATE_STATE_DIR=$work/services
export ORDERGATE_SERVICES=pg,standby
# The standby flushes what the primary commits at once (synchronous replication) but replays it
# this much later: it is behind when promoted, and promotion must replay the rest first.
export ORDERGATE_STANDBY_APPLY_DELAY_MS=${ORDERGATE_STANDBY_APPLY_DELAY_MS:-2000}
unset ORDERGATE_PG_PORT
drill_pid=
cleanup() {
    [ -z "$drill_pid" ] || kill -KILL "$drill_pid" 2>/dev/null || true
    "$services" down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

eval "$("$services" up)"
primary_port=$PGPORT
conn="$ORDERGATE_FAILOVER_HOSTS dbname=ordergate"
on_primary() { psql -X -At -h "$PGHOST" -p "$primary_port" -d ordergate -c "$1"; }
"$ctl" migrate --db "$conn" >/dev/null

orders=1500
"$ctl" drill --db "$conn" --json --orders $orders --consumers 2 --lead-ms 5000 --jitter-ms 3000 \
    --payers 4 --seed 31 "$@" >"$work/report.json" 2>"$work/drill.log" &
drill_pid=$!

# The race is under way once a fifth of the orders are settled.
deadline=$((SECONDS + 240))
until [ "$(on_primary "select count(*) from ordergate.orders where status <> 'pending_payment'" 2>/dev/null || echo 0)" -ge $((orders / 5)) ]; do
    kill -0 "$drill_pid" 2>/dev/null || { cat "$work/drill.log" >&2; fail "the drill ended before the race"; }
    [ $SECONDS -lt $deadline ] || { cat "$work/drill.log" >&2; fail "the race did not start within 240 s"; }
    sleep 0.2
done
settled_before=$(on_primary "select count(*) from ordergate.orders where status <> 'pending_payment'")
behind=$(on_primary "select pg_wal_lsn_diff(flush_lsn, replay_lsn) from pg_stat_replication where sync_state = 'sync'")
"$services" kill-primary
# A failover manager notices, then promotes; the clients retry meanwhile (database.retry_*).
sleep 1
"$services" promote
eval "$("$services" env)"

set +e
wait "$drill_pid"
rc=$?
set -e
drill_pid=
cat "$work/report.json"
echo "drill exit $rc; $settled_before orders settled when the primary died; standby behind in replay by $behind bytes"
violations=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["violations"])' "$work/report.json" 2>/dev/null || echo missing)
repeated=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["repeated_calls"])' "$work/report.json" 2>/dev/null || echo 0)
reconnected=$(grep -c 'db_reconnected' "$work/drill.log" || true)
grep 'db_reconnected\|SIGKILL\|promot' "$work/drill.log" | head -n 20 || true

[ $rc -eq 0 ] && [ "$violations" = 0 ] || { tail -n 60 "$work/drill.log" >&2; fail "drill exit $rc, violations $violations"; }
[ "${behind:-0}" -gt 0 ] 2>/dev/null || fail "the standby was not behind in replay when the primary died ($behind)"
[ "$repeated" -gt 0 ] || fail "no gate call was repeated: the failover missed the race"
[ "$reconnected" -gt 0 ] || fail "no process logged db_reconnected"
# The promoted server holds every order, and its own books balance over the whole database.
[ "$(psql -X -At -h "$PGHOST" -p "$ORDERGATE_STANDBY_PORT" -d ordergate -c 'select pg_is_in_recovery()')" = f ] ||
    fail "the standby was not promoted"
[ "$(psql -X -At -h "$PGHOST" -p "$ORDERGATE_STANDBY_PORT" -d ordergate -c 'select count(*) from ordergate.orders')" = $orders ] ||
    fail "the promoted server does not hold the $orders orders"
"$build/scanner/ordergate-scanner" --db "$conn" --reconcile --since all >"$work/reconcile.out" 2>&1 ||
    { cat "$work/reconcile.out" >&2; fail "reconciliation on the promoted server"; }
echo "drill_failover: passed ($repeated gate calls repeated across the failover, $reconnected db_reconnected lines)"
