#!/usr/bin/env bash
# Toxiproxy (Shopify's TCP proxy that injects network faults) for ordergate's fault tests: built
# from source with the Go toolchain at the pinned version, once, into the cache; never committed.
#
#   deploy/local/toxiproxy.sh install   build toxiproxy-server and toxiproxy-cli when missing;
#                                       print their directory on stdout
#   deploy/local/toxiproxy.sh up        start a server on a free loopback port in the state
#                                       directory; print `export ORDERGATE_TOXIPROXY=127.0.0.1:PORT`
#   deploy/local/toxiproxy.sh down      stop that server
#
# Environment: ORDERGATE_STATE_DIR and ORDERGATE_CACHE_DIR as for services.sh (the server's pid
# and log in $STATE/toxiproxy; the binaries in $CACHE/toxiproxy-<version>/bin).
# The proxies and toxics are made through the server's HTTP API (toxiproxy-cli or curl).
set -euo pipefail

# The one place the version is recorded.
TOXIPROXY_VERSION=v2.5.0

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
STATE=${ORDERGATE_STATE_DIR:-$REPO_ROOT/.local}
[[ $STATE == /* ]] || STATE=$PWD/$STATE
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE_DIR=${ORDERGATE_CACHE_DIR:-$HOME/.cache/ordergate}
BIN=$CACHE_DIR/toxiproxy-$TOXIPROXY_VERSION/bin
DIR=$STATE/toxiproxy

log() { printf 'toxiproxy: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

tp_install() {
    [[ -x $BIN/toxiproxy-server && -x $BIN/toxiproxy-cli ]] && return 0
    command -v go >/dev/null || die "go not found (the Go toolchain builds Toxiproxy from source)"
    mkdir -p "$BIN"
    (
        # Concurrent first runs would otherwise build into the same folder.
        exec 8>"$BIN/.lock"
        flock -w 900 8 || die "timed out waiting for another build"
        [[ -x $BIN/toxiproxy-server && -x $BIN/toxiproxy-cli ]] && exit 0
        log "building $TOXIPROXY_VERSION into $BIN"
        GOBIN=$BIN GOFLAGS=-mod=mod go install \
            "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
            "github.com/Shopify/toxiproxy/v2/cmd/cli@$TOXIPROXY_VERSION" </dev/null >"$BIN/../build.log" 2>&1 8>&- ||
            { tail -n 20 "$BIN/../build.log" >&2; die "go install failed (log: $BIN/../build.log)"; }
        mv "$BIN/server" "$BIN/toxiproxy-server"
        mv "$BIN/cli" "$BIN/toxiproxy-cli"
    )
}

tp_running() {
    local pid
    pid=$(cat "$DIR/pid" 2>/dev/null) || return 1
    kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q toxiproxy-server
}

tp_up() {
    tp_install
    if tp_running; then
        printf 'export ORDERGATE_TOXIPROXY=127.0.0.1:%s\n' "$(cat "$DIR/port")"
        return 0
    fi
    mkdir -p "$DIR"
    local port _
    for _ in 1 2 3; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        "$BIN/toxiproxy-server" -host 127.0.0.1 -port "$port" </dev/null >>"$DIR/server.log" 2>&1 &
        echo $! >"$DIR/pid"
        echo "$port" >"$DIR/port"
        local deadline=$((SECONDS + 20))
        until curl -fsS "http://127.0.0.1:$port/version" >/dev/null 2>&1; do
            tp_running || break
            ((SECONDS < deadline)) || die "no answer on 127.0.0.1:$port after 20 s"
            sleep 0.2
        done
        tp_running && break
    done
    tp_running || { tail -n 20 "$DIR/server.log" >&2; die "the server did not start"; }
    log "server $TOXIPROXY_VERSION on 127.0.0.1:$port (pid $(cat "$DIR/pid"))"
    printf 'export ORDERGATE_TOXIPROXY=127.0.0.1:%s\n' "$port"
}

tp_down() {
    tp_running || return 0
    local pid
    pid=$(cat "$DIR/pid")
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -rf "$DIR"
    log "stopped"
}

case ${1:-} in
    install) tp_install && echo "$BIN" ;;
    up) tp_up ;;
    down) tp_down ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
