#!/usr/bin/env bash
# Builds the decoder's libFuzzer target (clang, ASan, UBSan) and runs it for SECONDS.
#
#   tests/fuzz/run.sh SECONDS [BUILD_DIR]
#
# BUILD_DIR defaults to ${TMPDIR:-/tmp}/ordergate-fuzz. The corpus starts from seeds written
# below (valid and invalid messages of both kinds) and grows in BUILD_DIR/corpus between runs.
# Exit 0: no finding. Otherwise libFuzzer's report and the crashing input (BUILD_DIR/crash-*)
# tell what broke; reproduce with: BUILD_DIR/fuzz_codec BUILD_DIR/crash-...
set -euo pipefail
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [BUILD_DIR]}
here=$(cd "$(dirname "$0")" && pwd -P)
build=${2:-${TMPDIR:-/tmp}/ordergate-fuzz}

command -v clang >/dev/null || { echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null
# The build's output only when it fails (a link error would otherwise fail the test silently).
cmake --build "$build" >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }

corpus=$build/corpus
mkdir -p "$corpus"
# Seeds: byte 0 = (key length << 1) | kind (0 cancel, 1 payment), then key, then value.
seed() { # name kind key value
    local name=$1 kind=$2 key=$3 value=$4
    printf "\\$(printf '%03o' $(((${#key} << 1) | kind)))%s%s" "$key" "$value" >"$corpus/seed-$name"
}
seed cancel 0 A-1001 '{"v":1,"order_no":"A-1001","due_at":"2026-11-30T16:00:00.000Z"}'
seed cancel-nokey 0 '' '{"v":1,"order_no":"o.1_2:3","due_at":"2026-11-30T17:00:00.25+01:00","x":[1,{"y":null}]}'
seed cancel-v2 0 '' '{"v":2,"order_no":"A","due_at":"2026-11-30T16:00:00Z"}'
seed cancel-dup 0 '' '{"v":1,"order_no":"A","order_no":"B","due_at":"2026-11-30T16:00:00Z"}'
seed cancel-date 0 '' '{"v":1,"order_no":"A","due_at":"0000-01-01T00:00:00.999999999-23:59"}'
seed payment 1 P-1 '{"v":1,"order_no":"P-1","txn_no":"T-9","amount_cents":1999,"channel":"Credit Card"}'
seed payment-bad 1 '' '{"v":1,"order_no":"P-1","txn_no":"T 9","amount_cents":1e3,"channel":"\u0001"}'

# Tokens of the contract help the fuzzer past the JSON structure.
dict=$build/codec.dict
cat >"$dict" <<'DICT'
"\"v\""
"\"order_no\""
"\"due_at\""
"\"txn_no\""
"\"amount_cents\""
"\"channel\""
"2026-11-30T16:00:00.000Z"
"+01:00"
"\\u0000"
DICT

echo "fuzz: running fuzz_codec for ${seconds}s (corpus $corpus)"
cd "$build"
# -rss_limit_mb and -timeout catch runaway memory or time on one input (a hang is a finding).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    ./fuzz_codec -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -max_len=8192 \
    -dict="$dict" -print_final_stats=1 "$corpus" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
