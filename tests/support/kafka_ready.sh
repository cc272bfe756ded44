#!/usr/bin/env bash
# CTest fixture: the broker in ORDERGATE_BROKERS answers a metadata request.
set -euo pipefail
if [ -z "${ORDERGATE_BROKERS:-}" ]; then
    echo "kafka_ready: ORDERGATE_BROKERS is not set; run deploy/local/services.sh up" >&2
    exit 1
fi
for _ in $(seq 1 30); do
    if kcat -L -b "$ORDERGATE_BROKERS" -m 5 >/dev/null 2>&1; then
        echo "kafka_ready: broker $ORDERGATE_BROKERS answers"
        exit 0
    fi
    sleep 1
done
echo "kafka_ready: broker $ORDERGATE_BROKERS does not answer" >&2
exit 1
