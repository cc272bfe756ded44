#!/usr/bin/env bash
# The peers, one command: ordergate-consumer, River (coalesced and single) and pg-boss (coalesced
# and single) on the same gate SQL (ordergate.claim_cancel), the same database and the same order
# shapes, at the steady rates and in the burst; one line per system and workload at the end, every
# figure from the same SQL over status_log (tools/bench/consumer/peer.c), with ratios.
#
#   tools/bench/peers/run.sh [--quick] [--build DIR] [--rates "1000 5000"] [--duration S]
#                            [--steady apart|beside|both] [--consumers "1 2"]
#                            [--burst N] [--single-burst N] [--systems LIST] [--out DIR]
#   tools/bench/peers/run.sh --summary LINES     (the table again from a run's "lines" file)
#
# Steady (og_bench_consumer's lateness phase), each run on a fresh database of the same shape with
# the same due times, in one of two modes:
#   apart (the default): every system alone at the rate, nothing else claiming: for each rate the
#     consumer alone, then each peer alone (--peer-only), then the consumer alone again (its two
#     runs show how far the machine drifted in between; a peer's ratios are over the mean of the
#     two), then the consumer in groups of each other size of --consumers (two by default). This
#     measures punctuality at the rate, which is what a shop lives with;
#   beside: for each rate, one run per peer, the consumer and that peer side by side on orders of
#     their own (each pair in its own run: all five at once would be five times the rate on one
#     database). Each asks the database for the rate, so the pair asks for twice it: at 5,000/s
#     each that is beyond what one gate session does on a 2-core machine, and the figures then
#     measure how two claimers share a saturated database, not punctuality.
#   both: apart, then beside, for each rate.
#
# Burst (og_bench_consumer's burst phase, no ANALYZE): one run per system, each on a fresh
# database of the same shape, the gate alone measured before and after in each run. The
# one-job-per-claim shapes drain a smaller burst (--single-burst, beside the consumer on the same
# size): at their rate on this machine, 100,000 would take 10 to 20 minutes each.
#
# Builds the peers first: River's Go modules and pg-boss's npm packages are fetched into a cache
# outside the repository (PEER_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/ordergate-peers; go.sum
# and package-lock.json pin them); nothing fetched is committed. Needs Go, Node 20 and npm, the PG*
# environment and ORDERGATE_BROKERS of deploy/local/services.sh (pg,kafka) and the template
# database (tests/support/db_template.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    cat <<'EOF'
Options (defaults fit a loaded 2-core machine):
  --build DIR      the build directory (default: build/ of the repository)
  --rates LIST     steady workloads, due orders/s each (default "1000 5000")
  --duration S     seconds of due times of a steady workload (default 20)
  --steady MODE    apart (default: each system alone at the rate), beside (the consumer and one
                   peer side by side, each at the rate) or both
  --consumers LIST apart: the consumer group sizes at each rate (default "1 2"); one consumer
                   always runs, twice, before and after the peers
  --lead S         steady: setup time before the first due time (default 60)
  --burst N        orders due at once in the burst (default 100000; 0: no burst)
  --single-burst N the burst of the single shapes, and the consumer's beside it (default
                   10000; 0: none)
  --burst-lead S   burst: setup time before the due second (default 60 + N/2000)
  --ceiling N      orders of each gate-alone measurement (default 10000)
  --partitions N   the consumer's topic partitions (default 8)
  --systems LIST   peers to run, comma-separated, of river-coalesced, river-single,
                   pgboss-coalesced, pgboss-single (default all four; the consumer always runs)
  --out DIR        where the runs' full output goes (default a new directory under /tmp)
  --quick          a smoke run: --rates 200 --duration 5 --lead 20 --burst 3000
                   --single-burst 0 --burst-lead 20 --ceiling 1000
  --summary LINES  print the table of a run's "lines" file and exit
EOF
}

build=$repo/build
rates="1000 5000"
duration=20
lead=60
steady=apart
consumer_counts="1 2"
burst=100000
single_burst=10000
burst_lead=
summary=
ceiling=10000
partitions=8
systems=river-coalesced,river-single,pgboss-coalesced,pgboss-single
out=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --lead) lead=$2; shift 2 ;;
    --steady) steady=$2; shift 2 ;;
    --consumers) consumer_counts=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --single-burst) single_burst=$2; shift 2 ;;
    --burst-lead) burst_lead=$2; shift 2 ;;
    --ceiling) ceiling=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --systems) systems=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) rates=200 duration=5 lead=20 burst=3000 single_burst=0 burst_lead=20 ceiling=1000; shift ;;
    --summary) summary=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
done
# One line per system and workload, with the mode of its run (apart, beside; a burst runs alone).
# Steady apart: the consumer's two runs alone (the second with its drift over the first), each
# peer alone with its lateness over the mean of the consumer's two, a larger group of consumers
# over that mean too. Steady beside: the consumer's line of each pair, then the peer's, with the
# peer's lateness over the consumer's of the same run. Burst: drain, and its rate over the gate
# alone of its own run and over the consumer's. A line with orders left or cancelled early says
# FAILED. Lines of earlier runs, without mode= or consumers=, read as beside and one consumer.
summarize() { # the lines file
    awk '
function kv(line, key,   m) {
    if (match(line, " " key "=[^ ]*")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
    return ""
}
function ratio(a, b) { return b > 0 ? sprintf("%.2fx", a / b) : "-" }
function ratios(l, p50, p99, max) {
    return sprintf("p50 %s p99 %s max %s", ratio(kv(l, "p50_ms"), p50), ratio(kv(l, "p99_ms"), p99),
        ratio(kv(l, "max_ms"), max))
}
{
    sys = kv($0, "system"); wl = kv($0, "workload"); n++
    md = kv($0, "mode"); if (md == "") md = wl ~ /^burst/ ? "alone" : "beside"
    k = kv($0, "consumers"); if (k == "") k = sys == "ordergate-consumer" ? 1 : 0
    s[n] = sys; w[n] = wl; m[n] = md; c[n] = k; line[n] = $0
    if (sys == "ordergate-consumer" && wl ~ /^burst/) cons_burst[wl] = kv($0, "drain_s")
    if (sys == "ordergate-consumer" && md == "apart" && k == 1 && kv($0, "run_failed") != 1) {
        # The consumer alone, one instance: its runs of this rate, for the mean.
        base_n[wl]++; base_50[wl] += kv($0, "p50_ms"); base_99[wl] += kv($0, "p99_ms"); base_max[wl] += kv($0, "max_ms")
        if (kv($0, "pass") == 1) first[wl] = $0
    }
}
END {
    printf "%-22s %-16s %-6s %8s %9s %8s %9s %9s %9s %6s %6s  %s\n", "system", "workload", "mode", "orders",
        "drain s", "rate/s", "p50 ms", "p99 ms", "max ms", "early", "left", "ratios"
    for (i = 1; i <= n; i++) {
        l = line[i]
        r = ""
        if (m[i] == "apart" && s[i] == "ordergate-consumer" && c[i] == 1) {
            if (kv(l, "pass") == 2 && first[w[i]] != "")
                r = sprintf("alone, after the peers; / before them: %s", ratios(l, kv(first[w[i]], "p50_ms"),
                    kv(first[w[i]], "p99_ms"), kv(first[w[i]], "max_ms")))
            else
                r = kv(l, "pass") == 1 ? "alone, before the peers" : kv(l, "pass") == 2 ? "alone, after the peers" : "alone"
        } else if (m[i] == "apart" && base_n[w[i]] > 0) {
            r = sprintf("alone; / one consumer alone (mean of %d): %s", base_n[w[i]],
                ratios(l, base_50[w[i]] / base_n[w[i]], base_99[w[i]] / base_n[w[i]], base_max[w[i]] / base_n[w[i]]))
        } else if (m[i] == "beside" && w[i] ~ /^steady/ && s[i] != "ordergate-consumer" && i > 1 &&
                   s[i - 1] == "ordergate-consumer" && w[i - 1] == w[i] && m[i - 1] == "beside") {
            r = sprintf("/ consumer beside it: %s", ratios(l, kv(line[i - 1], "p50_ms"), kv(line[i - 1], "p99_ms"),
                kv(line[i - 1], "max_ms")))
        }
        if (w[i] ~ /^burst/) {
            r = sprintf("rate / gate alone %s", ratio(kv(l, "rate"), kv(l, "gate_alone")))
            if (s[i] != "ordergate-consumer" && cons_burst[w[i]] > 0)
                r = r sprintf("; drain / consumer %s", ratio(kv(l, "drain_s"), cons_burst[w[i]]))
        }
        if (kv(l, "early") > 0)
            r = "FAILED: " kv(l, "early") " cancelled before expire_at" (r == "" ? "" : "; " r)
        if (kv(l, "left") > 0)
            r = "FAILED: " kv(l, "left") " left, lateness of the cancelled only" (r == "" ? "" : "; " r)
        name = c[i] > 1 ? s[i] " x" c[i] : s[i]
        if (kv(l, "run_failed") == 1) {
            printf "%-22s %-16s %-6s %8s %9s %8s %9s %9s %9s %6s %6s  %s\n", name, w[i], m[i], "-", "-", "-", "-", "-",
                "-", "-", "-", "FAILED: the run ended without its figures (see its log)"
            continue
        }
        printf "%-22s %-16s %-6s %8s %9.2f %8s %9.1f %9.1f %9.1f %6s %6s  %s\n", name, w[i], m[i], kv(l, "orders"),
            kv(l, "drain_s"), kv(l, "rate"), kv(l, "p50_ms"), kv(l, "p99_ms"), kv(l, "max_ms"), kv(l, "early"),
            kv(l, "left"), r
    }
}' "$1"
}
case $steady in
apart | beside | both) ;;
*) echo "run.sh: --steady takes apart, beside or both, not $steady" >&2; exit 2 ;;
esac
for k in $consumer_counts; do
    case $k in [1-8]) ;; *) echo "run.sh: --consumers takes group sizes of 1 to 8, not $k" >&2; exit 2 ;; esac
done
if [ -n "$summary" ]; then
    summarize "$summary"
    exit 0
fi
[ -n "$burst_lead" ] || burst_lead=$((60 + burst / 2000))
bench=$build/tools/og_bench_consumer
[ -x "$bench" ] || { echo "run.sh: no $bench (build og_bench_consumer first)" >&2; exit 1; }
[ -n "$out" ] || out=$(mktemp -d /tmp/og-peers-run.XXXXXX)
mkdir -p "$out"

# The peers, built or installed into the cache when what pins them changed.
cache=${PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ordergate-peers}
mkdir -p "$cache/pgboss"
case ,$systems, in
*,river-*)
    export GOPATH=$cache/go GOMODCACHE=$cache/go/pkg/mod GOFLAGS=-modcacherw
    (cd "$here/river" && go build -o "$cache/og_peer_river" .)
    ;;
esac
case ,$systems, in
*,pgboss-*)
    node_major=$(node -p 'process.versions.node.split(".")[0]')
    [ "$node_major" -ge 20 ] || { echo "run.sh: pg-boss's peer needs Node 20 or later" >&2; exit 1; }
    if ! cmp -s "$here/pgboss/package-lock.json" "$cache/pgboss/package-lock.json" ||
        [ ! -d "$cache/pgboss/node_modules/pg-boss" ]; then
        cp "$here/pgboss/package.json" "$here/pgboss/package-lock.json" "$cache/pgboss/"
        (cd "$cache/pgboss" && npm ci --omit=dev --no-audit --no-fund --cache "$cache/npm" >&2)
    fi
    ;;
esac
# og_bench_consumer starts a peer with its protocol's arguments only: a wrapper per system adds
# the shape.
wrapper() { # name, command...
    local name=$1
    shift
    { printf '#!/bin/sh\nexec'; printf ' %q' "$@"; printf ' "$@"\n'; } > "$cache/peer-$name"
    chmod +x "$cache/peer-$name"
}
wrapper river-coalesced "$cache/og_peer_river" -mode coalesced -flushers 1
wrapper river-single "$cache/og_peer_river" -mode single
wrapper pgboss-coalesced env NODE_PATH="$cache/pgboss/node_modules" node "$here/pgboss/main.js" \
    -mode coalesced
wrapper pgboss-single env NODE_PATH="$cache/pgboss/node_modules" node "$here/pgboss/main.js" \
    -mode single

IFS=, read -r -a peers <<< "$systems"
for p in "${peers[@]}"; do
    [ -x "$cache/peer-$p" ] || { echo "run.sh: unknown system $p" >&2; exit 2; }
done
lines=$out/lines
: > "$lines"
commit=$(git -C "$repo" rev-parse --short HEAD)
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); commit: $commit$(git -C "$repo" diff --quiet HEAD || echo ' (with uncommitted changes)')"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
    echo "command: $0 --rates \"$rates\" --duration $duration --lead $lead --steady $steady --consumers \"$consumer_counts\" --burst $burst --single-burst $single_burst --burst-lead $burst_lead --ceiling $ceiling --partitions $partitions --systems $systems"
} | tee "$out/header"

# One og_bench_consumer run. It prints all its lines or none: a run that ended without them
# (setup too slow, a process that died) leaves a run_failed line for each system it was to
# measure ("system workload [consumers]", ;-separated), so the table shows the gap.
run() { # tags (" key=value" added to the run's lines), log file, its systems, og_bench_consumer arguments...
    local tags=$1 log=$2 want=() got w f
    IFS=';' read -r -a want <<< "$3"
    shift 3
    echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg): og_bench_consumer $* (log $log)"
    if ! "$bench" "$@" > "$log" 2>&1; then
        echo "   FAILED: tail of $log:"
        tail -5 "$log" | sed 's/^/   /'
    fi
    got=$(grep '^peers: ' "$log" || true)
    if [ -z "$got" ]; then
        for w in "${want[@]}"; do
            read -r -a f <<< "$w"
            got+="peers: system=${f[0]} workload=${f[1]}${f[2]:+ consumers=${f[2]}} run_failed=1"$'\n'
        done
    fi
    printf '%s\n' "$got" | sed '/^$/d' | sed "s|\$|$tags|" | tee -a "$lines" | sed 's/^/   /'
}
common=(--no-gate-bench --partitions "$partitions" --ceiling-orders "$ceiling")
steady_run() { # tags, log name, its systems, og_bench_consumer arguments beyond the workload's...
    local tags=$1 name=$2 want=$3
    shift 3
    run "$tags" "$out/steady-$rate-$name.log" "$want" --phases lateness --rate "$rate" \
        --duration "$duration" --lead "$lead" "${common[@]}" "$@"
}
for rate in $rates; do
    if [ "$steady" != beside ]; then
        # Each system alone; the consumer before and after the peers, so the machine's drift
        # between the first run and the last shows.
        wl=steady-$rate/s
        steady_run " mode=apart pass=1" consumer-1 "ordergate-consumer $wl 1" --consumers 1
        for p in "${peers[@]}"; do
            steady_run " mode=apart" "$p-alone" "$p $wl 0" --peer "$cache/peer-$p" \
                --peer-name "$p" --peer-only
        done
        steady_run " mode=apart pass=2" consumer-2 "ordergate-consumer $wl 1" --consumers 1
        for k in $consumer_counts; do
            [ "$k" = 1 ] || steady_run " mode=apart" "consumers-$k" "ordergate-consumer $wl $k" \
                --consumers "$k"
        done
    fi
    if [ "$steady" != apart ]; then
        for p in "${peers[@]}"; do
            steady_run " mode=beside" "$p" "ordergate-consumer steady-$rate/s 1;$p steady-$rate/s 0" \
                --peer "$cache/peer-$p" --peer-name "$p"
        done
    fi
done
burst_run() { # orders, system (ordergate or a peer)
    local extra=() sys=ordergate-consumer
    [ "$2" = ordergate ] || extra=(--peer "$cache/peer-$2" --peer-name "$2") sys=$2
    run " mode=alone" "$out/burst-$1-$2.log" "$sys burst-$1" --phases burst --burst-orders "$1" \
        --burst-stats none --burst-lead "$burst_lead" "${common[@]}" "${extra[@]}"
}
if [ "$burst" -gt 0 ]; then
    burst_run "$burst" ordergate
    for p in "${peers[@]}"; do
        case $p in *-single) [ "$single_burst" -gt 0 ] && continue ;; esac
        burst_run "$burst" "$p"
    done
fi
if [ "$single_burst" -gt 0 ] && [[ ,$systems, == *-single,* ]]; then
    burst_run "$single_burst" ordergate
    for p in "${peers[@]}"; do
        case $p in *-single) burst_run "$single_burst" "$p" ;; esac
    done
fi

echo
cat "$out/header"
summarize "$lines" | tee "$out/summary"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); full output: $out"
