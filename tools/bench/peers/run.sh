#!/usr/bin/env bash
# Side by side: ordergate-consumer and River claiming the same shape of cancels (same due times,
# same gate SQL, same database, same minute), lateness p50/p99/max of each from the same SQL over
# status_log, and the ratios. Builds the River peer first (its modules are fetched into a cache
# outside the repository; nothing fetched is committed).
#
#   tools/bench/peers/run.sh [BUILD_DIR] [RATE...]     (default: build, rates 1000 5000)
#
# Needs the PG* environment and ORDERGATE_BROKERS of deploy/local/services.sh (pg,kafka), the
# template database (tests/support/db_template.sh) and Go. Environment: DURATION (s, default 30),
# PARTITIONS (8), MODE (coalesced | single), FLUSHERS (1), PEER_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/ordergate-peers).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../../build}
shift || true
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(1000 5000)
cache=${PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ordergate-peers}
mkdir -p "$cache"
export GOPATH=$cache/go GOMODCACHE=$cache/go/pkg/mod GOFLAGS=-modcacherw
(cd "$here/river" && go build -o "$cache/og_peer_river" .)
peer=$cache/og_peer_river
# The bench starts the peer with -prefix only: a wrapper carries MODE and FLUSHERS.
printf '#!/bin/sh\nexec %s -mode %s -flushers %s "$@"\n' "$peer" "${MODE:-coalesced}" \
    "${FLUSHERS:-1}" > "$cache/og_peer_river_run"
chmod +x "$cache/og_peer_river_run"
peer=$cache/og_peer_river_run
for rate in "${rates[@]}"; do
    "$build/tools/og_bench_consumer" --phases lateness --rate "$rate" \
        --duration "${DURATION:-30}" --partitions "${PARTITIONS:-8}" --lead 60 \
        --ceiling-orders 2000 --no-gate-bench --peer "$peer"
done
