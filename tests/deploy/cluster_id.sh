#!/usr/bin/env bash
# deploy_cluster_id: the Kafka cluster ids deploy/local/services.sh makes are ones the format tool
# accepts: 22 characters of URL-safe base64 (16 bytes), never starting with '-' (the tool reads
# such an id as an option and the broker does not start; 1 in 64 random ids would). 2,000 ids:
# an id generator that allowed a leading '-' fails here with near certainty (1 - (63/64)^2000).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
fn=$(sed -n '/^kafka_cluster_id() {$/,/^}$/p' "$repo/deploy/local/services.sh")
[ -n "$fn" ] || { echo "deploy_cluster_id: FAIL: no kafka_cluster_id in services.sh" >&2; exit 1; }
eval "$fn"
bad=0
for _ in $(seq 2000); do
    id=$(kafka_cluster_id)
    if [[ ! $id =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]]; then
        echo "deploy_cluster_id: FAIL: id '$id' is not one the format tool takes" >&2
        bad=$((bad + 1))
    fi
done
[ "$bad" -eq 0 ] || exit 1
echo "deploy_cluster_id: 2000 ids, all 22 URL-safe base64 characters, none starting with '-'"
