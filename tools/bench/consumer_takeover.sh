#!/usr/bin/env bash
# The takeover drill at benchmark length: two ordergate-consumer instances with static group
# membership, orders falling due continuously, one instance SIGKILLed and started again at
# once every KILL_EVERY seconds (the two in turn). Prints the lateness of the cancellations
# (expire_at to closed_at: p50, p99, max) and fails only when an order was not cancelled
# exactly once. It runs the drill of tests/consumer/test_consumer_takeover.c with longer
# settings; see tools/bench/README.md, "consumer_takeover.sh".
#
#   tools/bench/consumer_takeover.sh [BUILD_DIR]     # default build/
#   SECONDS_DUE=300 KILL_EVERY=60 RATE=50 tools/bench/consumer_takeover.sh
#
# Needs PostgreSQL and Kafka as for the tests: eval "$(deploy/local/services.sh up)".
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
bin=$build/tests/consumer_takeover
if [[ ! -x $bin ]]; then
    echo "consumer_takeover.sh: $bin not built (cmake --build $build --target consumer_takeover)" >&2
    exit 2
fi
for v in ORDERGATE_BROKERS PGHOST; do
    if [[ -z ${!v:-} ]]; then
        echo "consumer_takeover.sh: $v is not set (eval \"\$(deploy/local/services.sh up)\")" >&2
        exit 2
    fi
done
# The database template the tests copy (tests/support/db_template.sh) must exist.
"$repo/tests/support/db_template.sh" >/dev/null
export OG_TAKEOVER_SECONDS=${SECONDS_DUE:-300}
export OG_TAKEOVER_KILL_EVERY=${KILL_EVERY:-60}
export OG_TAKEOVER_RATE=${RATE:-50}
echo "consumer_takeover.sh: $OG_TAKEOVER_RATE orders/s due over $OG_TAKEOVER_SECONDS s," \
    "SIGKILL + restart every $OG_TAKEOVER_KILL_EVERY s; commit $(git -C "$repo" rev-parse --short HEAD)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$build" && exec "$bin"
