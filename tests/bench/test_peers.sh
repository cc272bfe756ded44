#!/usr/bin/env bash
# The peers' harness still works, without the peers themselves (they need Go and Node and fetch
# their dependencies; tools/bench/peers/run.sh runs them by hand):
#   1. og_bench_consumer's burst phase drives a peer (tests/bench/fake_peer.sh, the protocol over
#      psql) through a small burst and prints its "peers:" line: every order counted, none left,
#      none early, a drain and a rate above zero;
#   2. the lateness phase runs a peer alone (--peer-only, as run.sh's apart mode does), with no
#      consumer and no broker: its "peers:" line has every order of its own, lateness from
#      status_log, none left, none early, and no consumer's line; the database held none of the
#      consumer's orders, so the peer's figures cannot come from them, nor the consumer's from the
#      peer's;
#   3. run.sh's table from canned lines: apart (a peer over the mean of the consumer's two runs
#      alone, the second run over the first, two consumers, FAILED lines), beside (the ratios
#      against the consumer of the same run) and the burst; and run.sh's apart runs in their order
#      with an og_bench_consumer that prints canned lines, one of its runs failing;
#   4. pg-boss's lock file still pins what package.json asks for.
# Needs PostgreSQL and the template database (the db fixture); fails without them.
#   tests/bench/test_peers.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: test_peers.sh BUILD_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(mktemp -d /tmp/og-test-peers.XXXXXX)
trap 'rm -rf "$out"' EXIT

# 1. The burst through a peer. No broker: with --peer the burst phase creates no topic.
rc=0
"$build/tools/og_bench_consumer" --phases burst --burst-orders 2000 --burst-stats none \
    --burst-lead 12 --ceiling-orders 1000 --no-gate-bench --dbname og_test_peers \
    --brokers 127.0.0.1:1 --peer "$here/fake_peer.sh" --peer-name fake > "$out/burst.log" 2>&1 ||
    rc=$?
[ "$rc" = 0 ] || { tail -20 "$out/burst.log"; fail "og_bench_consumer --peer exited $rc"; }
line=$(grep '^peers: system=fake workload=burst-2000 ' "$out/burst.log") ||
    { tail -20 "$out/burst.log"; fail "no peers: line for the fake peer"; }
echo "$line"
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$line"; }
[ "$(kv orders)" = 2000 ] || fail "orders=$(kv orders), expected 2000"
[ "$(kv left)" = 0 ] || fail "left=$(kv left), expected 0"
[ "$(kv early)" = 0 ] || fail "early=$(kv early), expected 0"
awk -v d="$(kv drain_s)" -v r="$(kv rate)" -v g="$(kv gate_alone)" \
    'BEGIN { exit !(d > 0 && d < 60 && r > 0 && g > 0) }' ||
    fail "drain_s=$(kv drain_s) rate=$(kv rate) gate_alone=$(kv gate_alone)"
grep -q 'peer .*fake_peer.sh: drained in ' "$out/burst.log" || fail "no drain line from the peer"

# 2. A peer alone at a steady rate; --keep leaves the phase's database to look into.
db=og_test_peers_alone
rc=0
"$build/tools/og_bench_consumer" --phases lateness --peer-only --rate 200 --duration 2 --lead 10 \
    --ceiling-orders 1000 --no-gate-bench --dbname "$db" --keep --brokers 127.0.0.1:1 \
    --peer "$here/fake_peer.sh" --peer-name fake > "$out/alone.log" 2>&1 || rc=$?
kept=$(sed -n 's/.*consumer logs and configs kept in \(.*\)$/\1/p' "$out/alone.log")
trap 'rm -rf "$out" ${kept:+"$kept"}; psql -Xq -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT
[ "$rc" = 0 ] || { tail -20 "$out/alone.log"; fail "og_bench_consumer --peer-only exited $rc"; }
[ "$(grep -c '^peers: ' "$out/alone.log")" = 1 ] ||
    { grep '^peers: ' "$out/alone.log"; fail "a peer-only run printed other lines than the peer's"; }
line=$(grep '^peers: system=fake workload=steady-200/s ' "$out/alone.log") ||
    { tail -20 "$out/alone.log"; fail "no steady peers: line for the fake peer alone"; }
echo "$line"
[ "$(kv orders)" = 400 ] || fail "orders=$(kv orders), expected 400 (the peer's own, not twice)"
[ "$(kv left)" = 0 ] || fail "left=$(kv left), expected 0"
[ "$(kv early)" = 0 ] || fail "early=$(kv early), expected 0"
[ "$(kv consumers)" = 0 ] || fail "consumers=$(kv consumers), expected 0"
# The due times span 2 s at 200/s: the drain is their span plus the last one's lateness; the fake
# peer claims every 10 ms, so its lateness is far below a second (a loaded machine: 5 s).
awk -v d="$(kv drain_s)" -v p="$(kv p50_ms)" -v x="$(kv max_ms)" -v g="$(kv gate_alone)" \
    'BEGIN { exit !(d >= 1.99 && d < 7 && p >= 0 && x >= p && x < 5000 && g > 0) }' ||
    fail "drain_s=$(kv drain_s) p50_ms=$(kv p50_ms) max_ms=$(kv max_ms) gate_alone=$(kv gate_alone)"
grep -q '^orders cancelled  *400 of 400 ' "$out/alone.log" ||
    fail "the summary's orders cancelled are not the peer's"
counts=$(psql -XAtq -d "$db" -c "SELECT (SELECT count(*) FROM ordergate.orders WHERE order_no LIKE 'l%'),
    (SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE 'r%'),
    (SELECT count(*) FROM ordergate.status_log WHERE order_no NOT LIKE 'r%' AND order_no NOT LIKE 'g%')")
[ "$counts" = "0|400|0" ] || fail "the consumer's orders | the peer's cancels | cancels other than \
the peer's and the gate alone's = $counts, expected 0|400|0"

# 3. The table: one line per system and workload, with its mode, ratios against the consumer's.
cat > "$out/lines" <<'LINES'
peers: system=ordergate-consumer workload=steady-200/s orders=1000 drain_s=5.000 rate=200 p50_ms=10.0 p99_ms=50.0 max_ms=100.0 early=0 left=0 gate_alone=3000 consumers=1 mode=apart pass=1
peers: system=river-coalesced workload=steady-200/s orders=1000 drain_s=5.000 rate=200 p50_ms=36.0 p99_ms=120.0 max_ms=150.0 early=0 left=0 gate_alone=3000 consumers=0 mode=apart
peers: system=pgboss-single workload=steady-200/s orders=300 drain_s=60.000 rate=5 p50_ms=5000.0 p99_ms=9000.0 max_ms=9900.0 early=0 left=700 gate_alone=3000 consumers=0 mode=apart
peers: system=ordergate-consumer workload=steady-200/s orders=1000 drain_s=5.000 rate=200 p50_ms=14.0 p99_ms=70.0 max_ms=200.0 early=0 left=0 gate_alone=3000 consumers=1 mode=apart pass=2
peers: system=ordergate-consumer workload=steady-200/s orders=1000 drain_s=5.000 rate=200 p50_ms=6.0 p99_ms=30.0 max_ms=75.0 early=1 left=0 gate_alone=3000 consumers=2 mode=apart
peers: system=ordergate-consumer workload=steady-1000/s orders=20000 drain_s=20.100 rate=995 p50_ms=10.0 p99_ms=50.0 max_ms=100.0 early=0 left=0 gate_alone=3000
peers: system=river-coalesced workload=steady-1000/s orders=20000 drain_s=20.200 rate=990 p50_ms=30.0 p99_ms=100.0 max_ms=150.0 early=0 left=0 gate_alone=3000
peers: system=ordergate-consumer workload=burst-100000 orders=100000 drain_s=5.000 rate=20000 p50_ms=2500.0 p99_ms=4950.0 max_ms=5000.0 early=0 left=0 gate_alone=25000
peers: system=river-coalesced workload=burst-100000 orders=100000 drain_s=15.000 rate=6667 p50_ms=7500.0 p99_ms=14850.0 max_ms=15000.0 early=0 left=0 gate_alone=20000
LINES
"$repo/tools/bench/peers/run.sh" --summary "$out/lines" > "$out/table"
cat "$out/table"
[ "$(grep -c . "$out/table")" = 10 ] || fail "the table has not a header and 9 lines"
grep -q '^ordergate-consumer *steady-200/s *apart .* 0  alone, before the peers$' "$out/table" ||
    fail "the consumer's first run alone"
grep -q '^river-coalesced *steady-200/s *apart .*mean of 2): p50 3.00x p99 2.00x max 1.00x$' \
    "$out/table" || fail "a peer alone against the mean of the consumer's two runs alone"
grep -q '^pgboss-single *steady-200/s *apart .* 700  FAILED: 700 left, ' "$out/table" ||
    fail "a peer alone that left orders"
grep -q '^ordergate-consumer *steady-200/s *apart .*after the peers; / before them: p50 1.40x p99 1.40x max 2.00x$' \
    "$out/table" || fail "the consumer's second run alone against its first"
grep -q '^ordergate-consumer x2 *steady-200/s *apart .* 1  *0  FAILED: 1 cancelled before expire_at; .*p50 0.50x' \
    "$out/table" || fail "two consumers, one order early"
grep -q '^ordergate-consumer *steady-1000/s *beside .* 0  $' "$out/table" ||
    fail "the consumer beside a peer (a line without mode= is beside)"
grep -q '^river-coalesced *steady-1000/s *beside .*p50 3.00x p99 2.00x max 1.50x' "$out/table" ||
    fail "steady ratios against the consumer beside it"
grep -q '^ordergate-consumer *burst-100000 .*rate / gate alone 0.80x$' "$out/table" ||
    fail "the consumer's burst rate against the gate alone"
grep -q '^river-coalesced *burst-100000 .*0.33x; drain / consumer 3.00x$' "$out/table" ||
    fail "the peer's burst drain against the consumer's"

# run.sh's runs in apart mode, with an og_bench_consumer that prints canned lines (no peers: none
# is built): the consumer alone before and after, then two consumers, whose run fails without its
# line. A line per run in that order, tagged with its mode and pass.
mkdir -p "$out/fake/tools"
cat > "$out/fake/tools/og_bench_consumer" <<'FAKE'
#!/bin/sh
case " $* " in *" --consumers 2 "*) echo "lateness: setup took 99 s"; exit 1 ;; esac
echo "peers: system=ordergate-consumer workload=steady-100/s orders=500 drain_s=5.000 rate=100 p50_ms=$FAKE_P50 p99_ms=20.0 max_ms=40.0 early=0 left=0 gate_alone=3000 consumers=1"
FAKE
chmod +x "$out/fake/tools/og_bench_consumer"
FAKE_P50=5.0 PEER_CACHE=$out/cache "$repo/tools/bench/peers/run.sh" --build "$out/fake" \
    --rates 100 --systems "" --burst 0 --single-burst 0 --out "$out/run" > "$out/run.log" 2>&1 ||
    { cat "$out/run.log"; fail "run.sh with no peers failed"; }
sed -n 's/^peers: system=\([^ ]*\) .*consumers=\([0-9]\).*mode=\([a-z]*\).*/\1 \2 \3/p' \
    "$out/run/lines" | tr '\n' ';' > "$out/order"
[ "$(cat "$out/order")" = "ordergate-consumer 1 apart;ordergate-consumer 1 apart;ordergate-consumer 2 apart;" ] ||
    fail "apart's runs: $(cat "$out/order")"
grep -q '^ordergate-consumer *steady-100/s *apart .*after the peers; / before them: p50 1.00x' \
    "$out/run/summary" || { cat "$out/run/summary"; fail "apart's second consumer run"; }
grep -q '^ordergate-consumer x2 *steady-100/s *apart .*FAILED: the run ended without its figures' \
    "$out/run/summary" || { cat "$out/run/summary"; fail "a run without its line"; }

"$repo/tools/bench/peers/run.sh" --steady sideways --summary "$out/lines" > /dev/null 2>&1 &&
    fail "run.sh took --steady sideways"

# 4. package-lock.json is generated from package.json (npm install --package-lock-only): the
#    versions package.json pins are the ones the lock holds.
python3 - "$repo/tools/bench/peers/pgboss" <<'PY' || fail "pgboss/package-lock.json is stale"
import json, sys
d = sys.argv[1]
pkg = json.load(open(d + "/package.json"))
lock = json.load(open(d + "/package-lock.json"))
want = pkg["dependencies"]
assert lock["packages"][""]["dependencies"] == want, "root dependencies differ"
for name, version in want.items():
    got = lock["packages"]["node_modules/" + name]["version"]
    assert got == version, f"{name}: lock {got}, package.json {version}"
PY
echo "ok: the peers' harness"
