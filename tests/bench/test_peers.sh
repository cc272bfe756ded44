#!/usr/bin/env bash
# The peers' harness still works, without the peers themselves (they need Go and Node and fetch
# their dependencies; tools/bench/peers/run.sh runs them by hand):
#   1. og_bench_consumer's burst phase drives a peer (tests/bench/fake_peer.sh, the protocol over
#      psql) through a small burst and prints its "peers:" line: every order counted, none left,
#      none early, a drain and a rate above zero;
#   2. run.sh's table from canned lines: the ratios against the consumer of the same workload;
#   3. pg-boss's lock file still pins what package.json asks for.
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

# 2. The table: one line per system and workload, ratios against the consumer's.
cat > "$out/lines" <<'LINES'
peers: system=ordergate-consumer workload=steady-1000/s orders=20000 drain_s=20.100 rate=995 p50_ms=10.0 p99_ms=50.0 max_ms=100.0 early=0 left=0 gate_alone=3000
peers: system=river-coalesced workload=steady-1000/s orders=20000 drain_s=20.200 rate=990 p50_ms=30.0 p99_ms=100.0 max_ms=150.0 early=0 left=0 gate_alone=3000
peers: system=ordergate-consumer workload=burst-100000 orders=100000 drain_s=5.000 rate=20000 p50_ms=2500.0 p99_ms=4950.0 max_ms=5000.0 early=0 left=0 gate_alone=25000
peers: system=river-coalesced workload=burst-100000 orders=100000 drain_s=15.000 rate=6667 p50_ms=7500.0 p99_ms=14850.0 max_ms=15000.0 early=0 left=0 gate_alone=20000
LINES
"$repo/tools/bench/peers/run.sh" --summary "$out/lines" > "$out/table"
cat "$out/table"
[ "$(grep -c . "$out/table")" = 5 ] || fail "the table has not a header and 4 lines"
grep -q '^river-coalesced *steady-1000/s .*p50 3.00x p99 2.00x max 1.50x' "$out/table" ||
    fail "steady ratios against the consumer beside it"
grep -q '^ordergate-consumer *burst-100000 .*rate / gate alone 0.80x$' "$out/table" ||
    fail "the consumer's burst rate against the gate alone"
grep -q '^river-coalesced *burst-100000 .*0.33x; drain / consumer 3.00x$' "$out/table" ||
    fail "the peer's burst drain against the consumer's"

# 3. package-lock.json is generated from package.json (npm install --package-lock-only): the
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
