#!/usr/bin/env bash
# Runs the whole of ordergate locally on a demo load:
#   builds; starts a throwaway PostgreSQL 15 and a single-node Kafka; applies the
#   schema; creates the topics; starts two consumers; places a dozen orders that
#   fall due in a few seconds, with payments before the deadline, at the last
#   second, after a payment-page hold, and too late; loses one cancel message on
#   purpose; runs the scanner (which reports the order the consumers missed) and
#   the reconciliation; then a small drill. Leaves everything running to play with.
#
#   deploy/quickstart.sh          start and demo (again: a new demo on the same services)
#   deploy/quickstart.sh stop     stop the consumers and the services, remove the state
#
# State lives in $ORDERGATE_STATE_DIR (default .local/ in the checkout).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
export ORDERGATE_STATE_DIR=${ORDERGATE_STATE_DIR:-$repo/.local}
build=${ORDERGATE_BUILD_DIR:-$repo/build}
run=$ORDERGATE_STATE_DIR/run
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

stop_consumers() {
    for pidfile in "$run"/consumer-*.pid; do
        [ -e "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        # SIGTERM: the consumer finishes its batch, commits and leaves the group.
        kill "$pid" 2>/dev/null && for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        rm -f "$pidfile"
    done
}

if [ "${1:-}" = stop ]; then
    say "stopping the consumers and the local services"
    stop_consumers
    deploy/local/services.sh down
    exit 0
fi

say "building into $build"
cmake -S . -B "$build" -G Ninja >/dev/null
cmake --build "$build" >/dev/null
consumer=$build/consumer/ordergate-consumer
scanner=$build/scanner/ordergate-scanner
ctl() { "$build/tools/ordergatectl" "$@"; }

say "starting PostgreSQL 15 and Kafka (state in $ORDERGATE_STATE_DIR)"
exports=$(deploy/local/services.sh up)
eval "$exports"
mkdir -p "$run"

say "applying the schema and creating the topics"
ctl migrate
ctl topics
psql -X -q -At -c "SELECT 'stock ' || ordergate.add_stock('demo-tshirt', 100) || ' t-shirts, '
                           || ordergate.add_stock('demo-mug', 100) || ' mugs'"

say "starting two consumers (group ordergate-demo)"
stop_consumers
for n in 1 2; do
    "$consumer" --group ordergate-demo --metrics-listen 127.0.0.1:0 >"$run/consumer-$n.log" 2>&1 &
    echo $! >"$run/consumer-$n.pid"
done
sleep 2
for n in 1 2; do
    kill -0 "$(cat "$run/consumer-$n.pid")" || { tail -20 "$run/consumer-$n.log"; exit 1; }
done
grep -ho 'event=metrics_listening[^ ]* [^ ]*' "$run"/consumer-*.log || true

# ---------------------------------------------------------------------------------------------
# The demo load: 12 orders that all fall due at one instant, 15 s from now.
# ---------------------------------------------------------------------------------------------
demo="DEMO-$(date +%H%M%S)"
due_epoch=$(($(date +%s) + 15))
due_iso=$(date -u -d "@$due_epoch" +%Y-%m-%dT%H:%M:%SZ)
say "placing 12 orders $demo-01..12, all due at $due_iso"
for i in $(seq -w 1 12); do
    coupon=()
    if [ $((10#$i % 3)) -eq 0 ]; then
        psql -X -q -At -c "SELECT ordergate.add_coupon('$demo-C$i')" >/dev/null
        coupon=(--coupon "$demo-C$i")
    fi
    amount=$((10#$i * 1000))           # 10.00 .. 120.00; the auto-refund limit is 50.00
    ctl place "$demo-$i" --amount $amount --item demo-tshirt:1 --item demo-mug:$((10#$i % 2 + 1)) \
        "${coupon[@]}" --expire-at "$due_iso" >/dev/null
    # Order 12's cancel message is "lost": only the scanner will find it.
    [ "$i" = 12 ] || ctl schedule "$demo-$i" >/dev/null
done
# at S: sleep until S seconds after the deadline (negative: before it).
at() { sleep "$(python3 -c "import sys,time; print(max(0.0, $due_epoch + float(sys.argv[1]) - time.time()))" "$1")"; }

say "payments around the deadline"
ctl pay "$demo-01" --txn "$demo-T01" --amount 1000 --channel card          # early: paid
ctl pay "$demo-02" --txn "$demo-T02" --amount 2000 --channel card          # early: paid
ctl pay "$demo-02" --txn "$demo-T02" --amount 2000 --channel card          # the channel retries: duplicate
at -3; ctl hold "$demo-03" --seconds 8                                     # on the payment page
at -1; ctl pay "$demo-04" --txn "$demo-T04" --amount 4000 --channel card   # last second: paid
at 2; ctl pay "$demo-03" --txn "$demo-T03" --amount 3000 --channel card    # after the deadline, held: paid
at 4
ctl pay "$demo-05" --txn "$demo-T05" --amount 5000 --channel card          # too late: small, auto refund
ctl pay "$demo-09" --txn "$demo-T09" --amount 9000 --channel card          # too late: large, manual review

say "what happened (status and who moved each order)"
psql -X -P footer=off -c "
SELECT o.order_no, o.status, coalesce(s.source, '-') AS moved_by,
       round(extract(epoch FROM s.created_at - o.expire_at)::numeric, 3) AS seconds_after_due,
       coalesce((SELECT string_agg(e.kind || '/' || e.resolution, ',') FROM ordergate.exceptions e
                  WHERE e.order_no = o.order_no), '') AS exception
  FROM ordergate.orders o LEFT JOIN ordergate.status_log s USING (order_no)
 WHERE o.order_no LIKE '$demo-%' ORDER BY o.order_no"

say "the scanner sweeps what the consumers missed (order 12's message was never sent)"
"$scanner" --grace 0 || true
ctl show "$demo-12"
say "reconciliation"
"$scanner" --reconcile --since 1h
say "open payment exceptions"
ctl exceptions --open --limit 5

say "a small drill: 1000 orders, 2 consumers, payments racing the cancels"
ctl drill --orders 1000 --consumers 2 --lead-ms 3000

cat <<TXT

ordergate keeps running:
  PostgreSQL  PGHOST=$PGHOST PGPORT=$PGPORT PGDATABASE=$PGDATABASE (schema ordergate)
  Kafka       $ORDERGATE_BROKERS
  consumers   pids $(cat "$run"/consumer-*.pid | tr '\n' ' ')(logs in $run)
  binaries    $consumer
              $scanner
              $build/tools/ordergatectl

Use them from this shell with:
$(deploy/local/services.sh env)

Try: $build/tools/ordergatectl show $demo-05
Stop everything with: deploy/quickstart.sh stop
TXT
