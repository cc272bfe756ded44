#!/usr/bin/env bash
# Throwaway PostgreSQL 15 and single-node Apache Kafka (KRaft) for ordergate's tests and demos.
#
#   deploy/local/services.sh up       start what is not running yet, wait until it answers,
#                                     print `export` lines on stdout (progress goes to stderr):
#                                       exports=$(deploy/local/services.sh up) && eval "$exports"
#   deploy/local/services.sh env      print the export lines for the services that run
#   deploy/local/services.sh status   say what runs (exit 0 when all selected services run, 3 if not)
#   deploy/local/services.sh down     stop every service and remove the state directory
#   deploy/local/services.sh restart-kafka
#                                     stop the broker (SIGTERM) and start it again on the same
#                                     ports with its data, users and certificates (fault tests)
#   deploy/local/services.sh restart-pgbouncer
#                                     stop PgBouncer at once (SIGTERM: every client connection
#                                     drops) and start it again on the same port (fault tests)
#   deploy/local/services.sh kill-primary
#                                     SIGKILL the primary PostgreSQL, postmaster and every backend
#                                     at once, as a crashed host would (fault tests; with standby)
#   deploy/local/services.sh promote  promote the standby to primary and wait until it accepts
#                                     writes (after kill-primary, as a failover manager would)
#   deploy/local/services.sh kill-broker N...
#                                     SIGKILL nodes of the three-node cluster, as a crashed host
#                                     would (ORDERGATE_KAFKA_NODES=3; fault tests)
#   deploy/local/services.sh start-broker N...
#                                     start nodes again with their data and ports, wait until
#                                     each answers
#   deploy/local/services.sh restart-broker N
#                                     stop node N (SIGTERM: a controlled shutdown that moves its
#                                     leaderships away first) and start it again
#   deploy/local/services.sh roll-brokers
#                                     restart-broker 1, 2, 3 in turn, each only once every
#                                     partition has all its replicas in sync again
#   deploy/local/services.sh leader TOPIC PARTITION
#                                     print the node id that leads the partition (nothing: none)
#   deploy/local/services.sh coordinator GROUP
#                                     print the node id of GROUP's coordinator (the leader of
#                                     its __consumer_offsets partition)
#   deploy/local/services.sh under-replicated
#                                     print the partitions whose in-sync replicas are fewer than
#                                     their replicas, one "topic partition isr/replicas" a line
#   deploy/local/services.sh fetch    only resolve and cache the Kafka jars
#   deploy/local/services.sh fetch-pom POM NAME
#                                     resolve and cache POM's runtime jars in the cache folder NAME
#                                     (e.g. examples/mall's JDBC driver); print their directory
#
# Environment:
#   ORDERGATE_STATE_DIR   state (data, sockets, logs, pid files); default .local/ at the repo root
#   ORDERGATE_CACHE_DIR   jar cache; default $HOME/.cache/ordergate (jars in kafka-<ver>/libs)
#   ORDERGATE_SERVICES    comma-separated: pg, kafka, pgbouncer, standby; default "pg,kafka". pgbouncer
#                         is PgBouncer in transaction pooling mode in front of the local
#                         PostgreSQL (started with it), exported as ORDERGATE_PGBOUNCER_PORT
#                         standby is a streaming standby of the local PostgreSQL (pg_basebackup,
#                         synchronous replication: every commit the primary acknowledges is
#                         flushed on the standby), exported as ORDERGATE_STANDBY_PORT and the
#                         conninfo ORDERGATE_FAILOVER_HOSTS (both servers, the writable one wins)
#   ORDERGATE_STANDBY_APPLY_DELAY_MS  recovery_min_apply_delay of the standby: it flushes the WAL
#                         at once but replays it this much later, so that it is behind when
#                         promoted (promotion replays the rest first); default 0
#   ORDERGATE_PGBOUNCER=1 the same as adding pgbouncer to ORDERGATE_SERVICES
#   ORDERGATE_PGBOUNCER_PORT  TCP port for PgBouncer on 127.0.0.1; default: a free one
#   ORDERGATE_PGBOUNCER_POOL_SIZE  server connections per database and user; default 2, so
#                         that clients really share them
#   ORDERGATE_PG_PORT     TCP port for PostgreSQL on 127.0.0.1; default: a free one
#   ORDERGATE_KAFKA_PORT  PLAINTEXT port for Kafka on 127.0.0.1; default: a free one
#   ORDERGATE_KAFKA_ADVERTISED_PORT  the port the single broker advertises for its PLAINTEXT
#                         listener instead of its own: a TCP proxy's on 127.0.0.1 (Toxiproxy,
#                         tests/drill/chaos.sh) that forwards to ORDERGATE_KAFKA_PORT, so clients
#                         that reconnect to the address the broker advertises stay behind the
#                         proxy; the proxy must exist for clients to reach the broker at all.
#                         Default: the broker's own port
#   ORDERGATE_KAFKA_TLS   1: the broker also gets a SASL_SSL listener (SCRAM-SHA-512 users,
#                         a throwaway CA and broker certificate in the state directory);
#                         default 0 (PLAINTEXT only)
#   ORDERGATE_KAFKA_TLS_PORT  SASL_SSL port for Kafka on 127.0.0.1; default: a free one
#   ORDERGATE_KAFKA_NODES 1 (default): one broker, every topic with one replica. 3: a KRaft
#                         cluster of three nodes on 127.0.0.1, each controller and broker, with
#                         replication factor 3 and min.insync.replicas 2 for every topic (the
#                         internal ones included); ORDERGATE_BROKERS lists the three. No TLS.
#   ORDERGATE_KAFKA_HEAP  Java heap of each broker; default 512m (one node), 384m (each of three)
#   ORDERGATE_START_TIMEOUT  seconds to wait for each service to answer; default 60
#
# Several state directories can run side by side (each picks its own free ports), which is how
# several engineers or test runs share one machine.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)

# The state directory is resolved to an absolute path once: the exported PGHOST and the paths in
# the generated configs must stay valid whatever directory the caller later cd's to.
STATE=${ORDERGATE_STATE_DIR:-$REPO_ROOT/.local}
[[ $STATE == /* ]] || STATE=$PWD/$STATE
STATE=$(realpath -m -- "$STATE")
STATE_MARKER=$STATE/.ordergate-state

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE_DIR=${ORDERGATE_CACHE_DIR:-$HOME/.cache/ordergate}
SERVICES=${ORDERGATE_SERVICES:-pg,kafka}
if [[ ${ORDERGATE_PGBOUNCER:-0} == 1 && ,$SERVICES, != *,pgbouncer,* ]]; then SERVICES=$SERVICES,pgbouncer; fi
PGB_POOL_SIZE=${ORDERGATE_PGBOUNCER_POOL_SIZE:-2}
START_TIMEOUT=${ORDERGATE_START_TIMEOUT:-60}
SB_APPLY_DELAY_MS=${ORDERGATE_STANDBY_APPLY_DELAY_MS:-0}
# The name the primary knows its synchronous standby by (synchronous_standby_names).
SB_NAME=ordergate_standby

PG_BIN=${ORDERGATE_PG_BIN:-/usr/lib/postgresql/15/bin}
PG_SUPERUSER=postgres
PG_DATABASE=ordergate

# kafka.version is the single place the Kafka version is recorded (pom.xml takes it as a property).
KAFKA_VERSION=$(tr -d '[:space:]' <"$SCRIPT_DIR/kafka.version")
KAFKA_LIBS=$CACHE_DIR/kafka-$KAFKA_VERSION/libs
KAFKA_DIR=$STATE/kafka
KAFKA_PIDFILE=$KAFKA_DIR/kafka.pid
KAFKA_TLS=${ORDERGATE_KAFKA_TLS:-0}
KAFKA_TLS_DIR=$KAFKA_DIR/tls
# The SCRAM users made at format time: the one the ordergate programs log in as, and one for
# operators (the broker's own traffic stays on the PLAINTEXT and CONTROLLER listeners).
KAFKA_SASL_USER=ordergate
KAFKA_SASL_ADMIN=admin
KAFKA_NODES=${ORDERGATE_KAFKA_NODES:-1}
[[ $KAFKA_NODES == 1 || $KAFKA_NODES == 3 ]] || { echo "services: error: ORDERGATE_KAFKA_NODES must be 1 or 3" >&2; exit 2; }
if [[ $KAFKA_NODES == 3 ]]; then KAFKA_HEAP=${ORDERGATE_KAFKA_HEAP:-384m}; else KAFKA_HEAP=${ORDERGATE_KAFKA_HEAP:-512m}; fi
# The cluster's nodes live in $KCL_DIR/node-N; kcl_node N points the kafka_* helpers at one.
KCL_DIR=$STATE/kafka-cluster

# Ports are picked below the kernel's ephemeral range (32768+) so that outgoing connections
# cannot take a port we are about to hand to a server.
PORT_MIN=20000
PORT_SPAN=12000

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

wants() { [[ ,$SERVICES, == *,$1,* ]]; }

# True when process $1 exists and is not a zombie. Servers we start outlive this script and are
# re-parented to PID 1, which on some machines (CI VMs, containers) reaps them only after a while:
# `kill -0` alone would call a killed server alive.
proc_alive() {
    local st
    st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# SIGTERM to process $2 (named $1 in the log), SIGKILL if it still runs after $3 seconds; returns
# once it is gone.
proc_stop() {
    local what=$1 pid=$2 grace=$3
    log "$what: stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + grace))
    while proc_alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
    if proc_alive "$pid"; then
        log "$what: still running after $grace s; SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while proc_alive "$pid"; do sleep 0.1; done
    fi
}

# ---------------------------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------------------------

# True when nothing is bound to 127.0.0.1:$1. Binding (python) also catches sockets that are bound
# but not listening yet; the bash fallback can only see listeners.
port_free() {
    if [[ -z ${HAVE_PYTHON:-} ]]; then
        if python3 -c '' >/dev/null 2>&1; then HAVE_PYTHON=yes; else HAVE_PYTHON=no; fi
    fi
    if [[ $HAVE_PYTHON == yes ]]; then
        python3 - "$1" 2>/dev/null <<'PY'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
    else
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
    fi
}

# Random rather than sequential so that two instances starting at the same moment rarely race for
# the same port; a lost race is caught by the start functions, which then pick again.
pick_port() {
    local p _
    for _ in $(seq 1 300); do
        p=$((PORT_MIN + (RANDOM * 32768 + RANDOM) % PORT_SPAN))
        [[ " $* " == *" $p "* ]] && continue
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "found no free TCP port on 127.0.0.1"
}

# ---------------------------------------------------------------------------------------------
# State directory and locking
# ---------------------------------------------------------------------------------------------

# One `up`/`down` at a time per state directory (e.g. two test runs in the same checkout). The lock
# lives outside the state dir because `down` deletes that. Every background server is started with
# fd 9 closed, or it would hold the lock for as long as it runs.
lock_state() {
    local key
    key=$(printf '%s' "$STATE" | cksum | cut -d' ' -f1)
    exec 9>"${TMPDIR:-/tmp}/ordergate-services-$key.lock"
    flock -w 900 9 || die "another services.sh holds the lock for $STATE"
}

make_state_dir() {
    mkdir -p "$STATE"
    # PostgreSQL runs as another user when we are root: it must be able to traverse $STATE.
    chmod 0755 "$STATE"
    [[ -e $STATE_MARKER ]] || echo "ordergate local services state; removed by services.sh down" >"$STATE_MARKER"
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------

# initdb and postgres refuse to run as root. As root we run them as `postgres` (created by Debian's
# postgresql package) or, failing that, as an unprivileged `ordergate` user that we create.
pg_os_user() {
    if [[ $EUID -ne 0 ]]; then id -un; return; fi
    if id postgres >/dev/null 2>&1; then echo postgres; return; fi
    if ! id ordergate >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ordergate >&2
    fi
    echo ordergate
}

# Run a PostgreSQL server-side tool as the cluster's OS user. cd / first: a root cwd such as /root
# is not readable for that user, and postgres fails to "identify the current directory".
as_pg() {
    if [[ $EUID -eq 0 ]]; then
        (cd / && runuser -u "$PG_USER" -- "$@")
    else
        "$@"
    fi
}

# The cluster lives in $STATE/pg. When that path cannot be used (the cluster user cannot traverse a
# parent directory, e.g. a checkout under /root, or the socket path would exceed the kernel's
# 107-byte limit) it lives in a private directory under /tmp and $STATE/pg is a symlink to it.
pg_set_paths() {
    PG_DIR=$(readlink -f "$STATE/pg" 2>/dev/null || true)
    [[ -n $PG_DIR ]] || PG_DIR=$STATE/pg
    PG_DATA=$PG_DIR/data
    PG_SOCK=$PG_DIR/sock
    PG_LOG=$PG_DIR/log/postgresql.log
    PG_PORTFILE=$PG_DIR/port
}

pg_prepare_dir() {
    local dir=$STATE/pg
    if [[ ! -e $dir ]]; then
        mkdir -p "$dir"
        [[ $EUID -ne 0 ]] || chown "$PG_USER:" "$dir"
        if { [[ $EUID -eq 0 ]] && ! runuser -u "$PG_USER" -- test -w "$dir" 2>/dev/null; } ||
            ((${#dir} + 20 > 100)); then
            rmdir "$dir"
            local real
            real=$(mktemp -d "${TMPDIR:-/tmp}/ordergate-pg.XXXXXX")
            chmod 0755 "$real"
            [[ $EUID -ne 0 ]] || chown "$PG_USER:" "$real"
            ln -s "$real" "$dir"
            log "postgresql: $dir is not usable by '$PG_USER' or too long for a socket; using $real"
        fi
    fi
    pg_set_paths
    mkdir -p "$PG_SOCK" "$PG_DIR/log"
    [[ $EUID -ne 0 ]] || chown "$PG_USER:" "$PG_DIR" "$PG_SOCK" "$PG_DIR/log"
}

pg_initdb() {
    [[ -f $PG_DATA/PG_VERSION ]] && return 0
    log "postgresql: initdb in $PG_DATA"
    # --no-sync only skips flushing the freshly created files; the server itself runs with fsync on.
    # Locale C keeps sorting deterministic and needs no generated locales.
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_SUPERUSER" --auth=trust -E UTF8 --locale=C \
        --no-sync >"$PG_DIR/log/initdb.log" 2>&1 9>&- ||
        { tail -n 40 "$PG_DIR/log/initdb.log" >&2; die "postgresql: initdb failed"; }
    # Appended last, so these win over initdb's defaults. The port is given on the command line at
    # each start instead, because a restarted stale cluster may need a new one.
    as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# --- ordergate deploy/local/services.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_SOCK'
max_connections = 200
shared_buffers = 256MB
# Benchmarks measure durable commits: keep the defaults that make them durable.
fsync = on
synchronous_commit = on
full_page_writes = on
log_line_prefix = '%m [%p] %q%u@%d '
log_min_duration_statement = -1
EOF
    # The console's people log in with passwords, as in production (ordergate-console refuses a
    # login the server did not ask a password for): members of its roles are checked by
    # password, ahead of initdb's trust lines. The roles need not exist yet.
    local hba
    hba=$(cat "$PG_DATA/pg_hba.conf")
    printf '%s\n' \
        "local all +ordergate_console_viewer scram-sha-256" \
        "host all +ordergate_console_viewer 127.0.0.1/32 scram-sha-256" \
        "$hba" | as_pg tee "$PG_DATA/pg_hba.conf" >/dev/null
}

pg_port() { cat "$PG_PORTFILE" 2>/dev/null || true; }

pg_postmaster_pid() { head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true; }

# Not `pg_ctl status`: that trusts kill(pid, 0) and so calls a zombie postmaster running. The
# command line check guards against the pid having been reused by another process.
pg_running() {
    local pid
    pid=$(pg_postmaster_pid)
    [[ -n $pid ]] && proc_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-D $PG_DATA "
}

pg_answering() {
    local port
    port=$(pg_port)
    [[ -n $port ]] || return 1
    "$PG_BIN/pg_isready" -q -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" -d postgres -t 3 &&
        "$PG_BIN/psql" -X -q -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" -d postgres \
            -c 'select 1' >/dev/null 2>&1
}

pg_start_once() { # $1 = port
    echo "$1" >"$PG_PORTFILE"
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$START_TIMEOUT" -o "-p $1" start \
        </dev/null >&2 9>&-
}

# Start a cluster that is initialised but not running (new, or left by a killed postmaster).
pg_start() {
    local pid
    pid=$(pg_postmaster_pid)
    if [[ -n $pid && -e /proc/$pid ]] && ! proc_alive "$pid"; then
        # postgres ignores the lock files of a dead postmaster only once its pid is fully gone; a
        # zombie that PID 1 has not reaped yet makes it refuse to start. Give PID 1 time, then
        # remove the locks ourselves (the zombie holds no resources).
        log "postgresql: waiting for dead postmaster $pid to be reaped"
        local deadline=$((SECONDS + 10))
        while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
        if [[ -e /proc/$pid ]] && ! proc_alive "$pid"; then
            log "postgresql: removing the lock files of dead postmaster $pid"
            rm -f "$PG_DATA/postmaster.pid" "$PG_SOCK"/.s.PGSQL.*.lock
        fi
    fi
    local port _ started=
    for _ in 1 2 3; do
        if [[ -n ${ORDERGATE_PG_PORT:-} ]]; then
            port=$ORDERGATE_PG_PORT
        elif [[ -n $(pg_port) ]] && port_free "$(pg_port)"; then
            port=$(pg_port) # a stale cluster keeps its port when it can
        else
            port=$(pick_port)
        fi
        log "postgresql: starting on 127.0.0.1:$port and $PG_SOCK"
        if pg_start_once "$port"; then started=yes; break; fi
        # Only a lost race for the port is worth another try with a new one.
        if [[ -z ${ORDERGATE_PG_PORT:-} ]] && tail -n 20 "$PG_LOG" 2>/dev/null | grep -q 'could not bind\|Address already in use'; then
            log "postgresql: port $port was taken meanwhile; picking another"
            rm -f "$PG_PORTFILE"
            continue
        fi
        break
    done
    if [[ -z $started ]]; then
        log "postgresql: failed to start; last lines of $PG_LOG:"
        tail -n 40 "$PG_LOG" >&2 || true
        exit 1
    fi
}

pg_up() {
    local port started=
    PG_USER=$(pg_os_user)
    pg_set_paths
    if pg_running; then
        if [[ -n ${ORDERGATE_PG_PORT:-} && $(pg_port) != "$ORDERGATE_PG_PORT" ]]; then
            die "postgresql: runs on port $(pg_port), not ORDERGATE_PG_PORT=$ORDERGATE_PG_PORT; run down first"
        fi
        log "postgresql: already running (pid $(pg_postmaster_pid)) on port $(pg_port)"
    else
        pg_prepare_dir
        pg_initdb
        pg_start
        started=yes
    fi

    local deadline=$((SECONDS + START_TIMEOUT))
    until pg_answering; do
        if ((SECONDS >= deadline)); then
            log "postgresql: not answering after ${START_TIMEOUT}s; last lines of $PG_LOG:"
            tail -n 40 "$PG_LOG" >&2 || true
            exit 1
        fi
        sleep 0.5
    done

    port=$(pg_port)
    if [[ -z $("$PG_BIN/psql" -X -Atq -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" -d postgres \
        -c "select 1 from pg_database where datname = '$PG_DATABASE'") ]]; then
        "$PG_BIN/createdb" -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" "$PG_DATABASE"
    fi
    if [[ -n $started ]]; then
        log "postgresql: $("$PG_BIN/psql" -X -Atq -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" -d "$PG_DATABASE" \
            -c 'show server_version') ready"
    fi
}

pg_down() {
    [[ -e $STATE/pg ]] || return 0
    PG_USER=$(pg_os_user)
    pg_set_paths
    if pg_running; then
        log "postgresql: stopping"
        if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >&2 9>&-; then
            local pid
            pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
            if [[ -n $pid ]]; then
                log "postgresql: fast stop failed; killing postmaster $pid"
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
    fi
}

pg_exports() {
    printf 'export PGHOST=%q\n' "$PG_SOCK"
    printf 'export PGPORT=%q\n' "$(pg_port)"
    printf 'export PGUSER=%q\n' "$PG_SUPERUSER"
    printf 'export PGDATABASE=%q\n' "$PG_DATABASE"
}

# ---------------------------------------------------------------------------------------------
# PgBouncer (optional): transaction pooling in front of the local PostgreSQL
# ---------------------------------------------------------------------------------------------

# Its files live next to the cluster's (owned by the cluster's OS user, whom it runs as when we
# are root: PgBouncer refuses to run as root).
pgb_set_paths() {
    pg_set_paths
    PGB_DIR=$PG_DIR/pgbouncer
    PGB_INI=$PGB_DIR/pgbouncer.ini
    PGB_PIDFILE=$PGB_DIR/pgbouncer.pid
    PGB_LOG=$PGB_DIR/pgbouncer.log
    PGB_PORTFILE=$PGB_DIR/port
}

pgb_port() { cat "$PGB_PORTFILE" 2>/dev/null || true; }

pgb_pid() { cat "$PGB_PIDFILE" 2>/dev/null || true; }

pgb_running() {
    local pid
    pid=$(pgb_pid)
    [[ -n $pid ]] && proc_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$PGB_INI"
}

# A query through it, to the cluster's own database.
pgb_answering() {
    local port
    port=$(pgb_port)
    [[ -n $port ]] || return 1
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d "$PG_DATABASE" \
        -c 'select 1' >/dev/null 2>&1
}

# Every database of the cluster through the fallback entry (tests make their own), trust
# authentication like the cluster's (the user must still be listed in auth_file), the admin
# console (database "pgbouncer") for the cluster's superuser.
pgb_write_config() { # $1 = port
    as_pg tee "$PGB_INI" >/dev/null <<EOF
; Generated by deploy/local/services.sh: PgBouncer in transaction pooling mode for tests.
[databases]
* = host=$PG_SOCK port=$(pg_port)

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $1
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
admin_users = $PG_SUPERUSER
stats_users = $PG_SUPERUSER
pool_mode = transaction
default_pool_size = $PGB_POOL_SIZE
reserve_pool_size = 0
max_client_conn = 1000
; psql and the JDBC driver send these at startup
ignore_startup_parameters = extra_float_digits,options
logfile = $PGB_LOG
pidfile = $PGB_PIDFILE
log_connections = 0
log_disconnections = 0
EOF
    printf '"%s" ""\n' "$PG_SUPERUSER" | as_pg tee "$PGB_DIR/userlist.txt" >/dev/null
}

pgb_start() {
    local port _ started= user=()
    command -v pgbouncer >/dev/null || die "pgbouncer not found (Debian: apt-get install pgbouncer)"
    [[ $EUID -ne 0 ]] || user=(-u "$PG_USER")
    for _ in 1 2 3; do
        if [[ -n ${ORDERGATE_PGBOUNCER_PORT:-} ]]; then
            port=$ORDERGATE_PGBOUNCER_PORT
        elif [[ -n $(pgb_port) ]] && port_free "$(pgb_port)"; then
            port=$(pgb_port)
        else
            port=$(pick_port "$(pg_port)")
        fi
        echo "$port" | as_pg tee "$PGB_PORTFILE" >/dev/null
        pgb_write_config "$port"
        log "pgbouncer: starting on 127.0.0.1:$port (transaction pooling, pool size $PGB_POOL_SIZE)"
        # -d: it daemonizes once it listens, or exits non-zero.
        if (cd / && pgbouncer -d -q "${user[@]}" "$PGB_INI" </dev/null >&2 9>&-); then
            started=yes
            break
        fi
        if [[ -z ${ORDERGATE_PGBOUNCER_PORT:-} ]] && tail -n 5 "$PGB_LOG" 2>/dev/null | grep -q 'Address already in use'; then
            log "pgbouncer: port $port was taken meanwhile; picking another"
            continue
        fi
        break
    done
    if [[ -z $started ]]; then
        log "pgbouncer: failed to start; last lines of $PGB_LOG:"
        tail -n 20 "$PGB_LOG" >&2 2>/dev/null || true
        exit 1
    fi
    local deadline=$((SECONDS + START_TIMEOUT))
    until pgb_answering; do
        if ((SECONDS >= deadline)) || ! pgb_running; then
            log "pgbouncer: not answering; last lines of $PGB_LOG:"
            tail -n 20 "$PGB_LOG" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 0.2
    done
    log "pgbouncer: ready on 127.0.0.1:$(pgb_port) (pid $(pgb_pid))"
}

pgb_up() {
    PG_USER=$(pg_os_user)
    pgb_set_paths
    pg_running || die "pgbouncer: PostgreSQL does not run in $STATE (add pg to ORDERGATE_SERVICES)"
    if pgb_running && pgb_answering; then
        log "pgbouncer: already running on 127.0.0.1:$(pgb_port) (pid $(pgb_pid))"
        return 0
    fi
    if pgb_running; then pgb_down; fi
    mkdir -p "$PGB_DIR"
    [[ $EUID -ne 0 ]] || chown "$PG_USER:" "$PGB_DIR"
    pgb_start
}

# SIGTERM is PgBouncer's immediate shutdown: client and server connections close at once.
pgb_down() {
    [[ -e $STATE/pg ]] || return 0
    PG_USER=$(pg_os_user)
    pgb_set_paths
    pgb_running || return 0
    proc_stop pgbouncer "$(pgb_pid)" 10
}

pgb_exports() {
    printf 'export ORDERGATE_PGBOUNCER_PORT=%q\n' "$(pgb_port)"
}

# ---------------------------------------------------------------------------------------------
# Standby (optional): a streaming replica of the local PostgreSQL, synchronous, for failover tests
# ---------------------------------------------------------------------------------------------

# Its data directory lives next to the primary's (same OS user, same socket directory: the port
# tells the two sockets apart).
sb_set_paths() {
    pg_set_paths
    SB_DIR=$PG_DIR/standby
    SB_DATA=$SB_DIR/data
    SB_LOG=$SB_DIR/postgresql.log
    SB_PORTFILE=$SB_DIR/port
}

sb_port() { cat "$SB_PORTFILE" 2>/dev/null || true; }

sb_postmaster_pid() { head -n 1 "$SB_DATA/postmaster.pid" 2>/dev/null || true; }

sb_running() {
    local pid
    pid=$(sb_postmaster_pid)
    [[ -n $pid ]] && proc_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-D $SB_DATA "
}

sb_psql() { # $1 = port, then psql arguments
    local port=$1
    shift
    "$PG_BIN/psql" -X -Atq -h "$PG_SOCK" -p "$port" -U "$PG_SUPERUSER" -d postgres "$@"
}

# What the primary says of its synchronous standby: "sync" once it streams and counts for commits.
sb_sync_state() {
    sb_psql "$(pg_port)" -c "select sync_state from pg_stat_replication where application_name = '$SB_NAME'" 2>/dev/null || true
}

sb_make() {
    log "standby: pg_basebackup of 127.0.0.1:$(pg_port) into $SB_DATA"
    mkdir -p "$SB_DIR"
    [[ $EUID -ne 0 ]] || chown "$PG_USER:" "$SB_DIR"
    # initdb's pg_hba.conf trusts local replication connections. -R writes standby.signal and a
    # primary_conninfo, which the line below replaces to give the standby its name.
    as_pg "$PG_BIN/pg_basebackup" -h "$PG_SOCK" -p "$(pg_port)" -U "$PG_SUPERUSER" -D "$SB_DATA" \
        -R -X stream -c fast --no-sync >"$SB_DIR/basebackup.log" 2>&1 9>&- ||
        { tail -n 20 "$SB_DIR/basebackup.log" >&2; die "standby: pg_basebackup failed"; }
    # The copy of the primary's settings is the standby's too; these win. Once promoted it must
    # not wait for a synchronous standby of its own (there is none).
    as_pg tee -a "$SB_DATA/postgresql.auto.conf" >/dev/null <<EOF
# --- ordergate deploy/local/services.sh: standby ---
primary_conninfo = 'host=$PG_SOCK port=$(pg_port) user=$PG_SUPERUSER application_name=$SB_NAME'
synchronous_standby_names = ''
recovery_min_apply_delay = '${SB_APPLY_DELAY_MS}ms'
hot_standby = on
EOF
}

sb_start() {
    local port
    if [[ -n $(sb_port) ]] && port_free "$(sb_port)"; then port=$(sb_port); else port=$(pick_port "$(pg_port)"); fi
    echo "$port" | as_pg tee "$SB_PORTFILE" >/dev/null
    log "standby: starting on 127.0.0.1:$port (recovery_min_apply_delay ${SB_APPLY_DELAY_MS} ms)"
    as_pg "$PG_BIN/pg_ctl" -D "$SB_DATA" -l "$SB_LOG" -w -t "$START_TIMEOUT" -o "-p $port" start \
        </dev/null >&2 9>&- || { tail -n 40 "$SB_LOG" >&2 || true; die "standby: failed to start"; }
}

sb_up() {
    PG_USER=$(pg_os_user)
    sb_set_paths
    pg_running || die "standby: PostgreSQL does not run in $STATE (add pg to ORDERGATE_SERVICES)"
    if sb_running; then
        log "standby: already running (pid $(sb_postmaster_pid)) on port $(sb_port)"
    else
        [[ -f $SB_DATA/PG_VERSION ]] || sb_make
        sb_start
    fi
    # Synchronous from here on: a commit the primary acknowledges is flushed on the standby
    # (synchronous_commit = on), so a promotion loses none of them.
    sb_psql "$(pg_port)" -c "alter system set synchronous_standby_names = '$SB_NAME'" >/dev/null
    sb_psql "$(pg_port)" -c "select pg_reload_conf()" >/dev/null
    local deadline=$((SECONDS + START_TIMEOUT))
    until [[ $(sb_sync_state) == sync ]]; do
        if ((SECONDS >= deadline)); then
            log "standby: not streaming synchronously after ${START_TIMEOUT}s; last lines of $SB_LOG:"
            tail -n 20 "$SB_LOG" >&2 || true
            exit 1
        fi
        sleep 0.2
    done
    log "standby: streaming, synchronous, on 127.0.0.1:$(sb_port)"
}

sb_down() {
    [[ -e $STATE/pg ]] || return 0
    PG_USER=$(pg_os_user)
    sb_set_paths
    sb_running || return 0
    log "standby: stopping"
    if ! as_pg "$PG_BIN/pg_ctl" -D "$SB_DATA" -m fast -w -t 30 stop >&2 9>&-; then
        kill -KILL "$(sb_postmaster_pid)" 2>/dev/null || true
    fi
}

# Both servers, the primary first: libpq takes the first that accepts writes, so a client that
# reconnects after a promotion finds the new primary by itself.
sb_exports() {
    printf 'export ORDERGATE_STANDBY_PORT=%q\n' "$(sb_port)"
    printf 'export ORDERGATE_FAILOVER_HOSTS=%q\n' \
        "host=127.0.0.1,127.0.0.1 port=$(pg_port),$(sb_port) user=$PG_SUPERUSER target_session_attrs=read-write"
}

# A host crash: every process of the primary at once (a postmaster killed alone would leave its
# backends to finish what they were doing).
cmd_kill_primary() {
    lock_state
    PG_USER=$(pg_os_user)
    sb_set_paths
    pg_running || die "postgresql: the primary does not run in $STATE"
    local pid children
    pid=$(pg_postmaster_pid)
    children=$(pgrep -P "$pid" | tr '\n' ' ')
    log "postgresql: SIGKILL to the primary: postmaster $pid and its children $children"
    # shellcheck disable=SC2086 # one word per pid
    kill -KILL "$pid" $children 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while proc_alive "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
}

cmd_promote() {
    lock_state
    PG_USER=$(pg_os_user)
    sb_set_paths
    sb_running || die "standby: does not run in $STATE"
    log "standby: promoting"
    as_pg "$PG_BIN/pg_ctl" -D "$SB_DATA" -w -t "$START_TIMEOUT" promote >&2 9>&- ||
        die "standby: promotion failed; last lines of $SB_LOG: $(tail -n 5 "$SB_LOG")"
    [[ $(sb_psql "$(sb_port)" -c 'select pg_is_in_recovery()') == f ]] ||
        die "standby: still in recovery after pg_ctl promote"
    log "standby: promoted; 127.0.0.1:$(sb_port) accepts writes"
}

# ---------------------------------------------------------------------------------------------
# Jars from the Maven repository (Kafka's; examples/mall's JDBC driver)
# ---------------------------------------------------------------------------------------------

# Resolve the runtime dependencies of a POM from the Maven repository into a cache folder, once:
#   pom_fetch LABEL POM BASE CHECK_JAR [mvn -D options...]
# copies them into BASE/libs. The marker BASE/libs.complete is written only after a complete copy,
# so an interrupted fetch is redone rather than leaving a half-filled classpath. CHECK_JAR (a file
# name, or "" for "at least one jar") must be among them.
pom_fetch() {
    local label=$1 pom=$2 base=$3 check=$4
    shift 4
    [[ -f $base/libs.complete ]] && return 0
    command -v mvn >/dev/null || die "mvn not found (Debian: apt-get install maven)"
    [[ -f $pom ]] || die "$label: no POM at $pom"
    mkdir -p "$base"
    (
        # Concurrent first runs (several state dirs) would otherwise copy into the same folder.
        exec 8>"$base/.lock"
        flock -w 900 8 || die "$label: timed out waiting for another fetch"
        [[ -f $base/libs.complete ]] && exit 0
        log "$label: fetching the runtime dependencies of $pom into $base/libs"
        rm -rf "$base/libs" "$base/libs.tmp"
        # mvn's output goes to a file (shown on failure): even with -q, Debian's Maven 3.8 prints
        # bare terminal colour codes.
        if ! mvn -B -q -f "$pom" dependency:copy-dependencies "$@" \
            -DoutputDirectory="$base/libs.tmp" -DincludeScope=runtime \
            </dev/null >"$base/mvn.log" 2>&1 8>&- 9>&-; then
            sed 's/\x1b\[[0-9;]*m//g' "$base/mvn.log" | tail -n 40 >&2
            die "$label: mvn could not resolve the dependencies of $pom (log: $base/mvn.log)"
        fi
        if [[ -n $check ]]; then
            [[ -f $base/libs.tmp/$check ]] || die "$label: $check missing after mvn"
        else
            compgen -G "$base/libs.tmp/*.jar" >/dev/null || die "$label: no jar after mvn"
        fi
        mv "$base/libs.tmp" "$base/libs"
        touch "$base/libs.complete"
        log "$label: cached $(find "$base/libs" -name '*.jar' | wc -l) jars"
    )
}

# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------

# kafka_2.13 and its runtime dependencies (plus the slf4j binding the Kafka distribution adds).
kafka_fetch() {
    pom_fetch kafka "$SCRIPT_DIR/pom.xml" "$CACHE_DIR/kafka-$KAFKA_VERSION" \
        "kafka_2.13-$KAFKA_VERSION.jar" -Dkafka.version="$KAFKA_VERSION"
}

kafka_port() { cat "$KAFKA_DIR/port" 2>/dev/null || true; }

kafka_pid() { cat "$KAFKA_PIDFILE" 2>/dev/null || true; }

# A pid file alone can outlive the broker and its pid be reused: also check that the process is a
# broker started with this state directory's config.
kafka_running() {
    local pid
    pid=$(kafka_pid)
    [[ -n $pid ]] && proc_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $KAFKA_DIR/server.properties"
}

# A metadata request that lists a broker is the same first step every client takes.
kafka_answering() {
    local port
    port=$(kafka_port)
    [[ -n $port ]] || return 1
    # Cheap check first: kcat would spend its whole -m timeout on a port nobody listens on yet.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || return 1
    if command -v kcat >/dev/null; then
        kcat -L -b "127.0.0.1:$port" -m 5 2>/dev/null | grep -Eq '^ *[1-9][0-9]* brokers:' || return 1
    else
        # Without kcat: the broker logs this line once its listeners accept requests.
        grep -q 'Kafka Server started' "$KAFKA_DIR/logs/server.log" 2>/dev/null || return 1
    fi
    # The SASL_SSL listener opens with the others; a TCP connect is enough to see it.
    if kafka_has_tls; then
        (exec 3<>"/dev/tcp/127.0.0.1/$(kafka_tls_port)") 2>/dev/null || return 1
    fi
}

kafka_tls_port() { cat "$KAFKA_DIR/tls.port" 2>/dev/null || true; }

# True when the broker of this state directory was set up with the SASL_SSL listener.
kafka_has_tls() { [[ -n $(kafka_tls_port) ]]; }

# The settings the single broker and the cluster's nodes share.
kafka_config_common() {
    cat <<'EOF'
# Tests create consumer groups all the time; don't hold the first join back by 3 s.
group.initial.rebalance.delay.ms=0
# Let fault-injection tests use short consumer session timeouts (the default floor is 6 s).
group.min.session.timeout.ms=1000
# Creating 50 offset partitions on first group join takes seconds on a 2-core machine.
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8
# Like production: a topic exists only when someone created it (ordergatectl topics, a test, the
# drill), so nothing passes because a first produce or subscribe created a topic by accident.
auto.create.topics.enable=false
num.partitions=4
EOF
}

kafka_write_config() { # $1 = broker port, $2 = controller port, $3 = SASL_SSL port or ""
    local listeners="PLAINTEXT://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2"
    local advertised="PLAINTEXT://127.0.0.1:${ORDERGATE_KAFKA_ADVERTISED_PORT:-$1}"
    local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    if [[ -n $3 ]]; then
        listeners+=",SASL_SSL://127.0.0.1:$3"
        advertised+=",SASL_SSL://127.0.0.1:$3"
        protocols+=",SASL_SSL:SASL_SSL"
    fi
    cat >"$KAFKA_DIR/server.properties" <<EOF
# Generated by deploy/local/services.sh: single node, KRaft combined mode, for tests and demos.
node.id=1
process.roles=broker,controller
controller.quorum.voters=1@127.0.0.1:$2
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$KAFKA_DIR/data

# One broker: every internal topic has a single replica.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
EOF
    kafka_config_common >>"$KAFKA_DIR/server.properties"
    [[ -n $3 ]] || return 0
    cat >>"$KAFKA_DIR/server.properties" <<EOF

# SASL_SSL: TLS with the certificate of the throwaway CA in $KAFKA_TLS_DIR (clients verify it
# with ca.pem), then a SCRAM-SHA-512 login. The users were created at format time
# (StorageTool --add-scram); no client certificates.
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$KAFKA_TLS_DIR/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$(cat "$KAFKA_TLS_DIR/keystore.password")
listener.name.sasl_ssl.ssl.client.auth=none
EOF
}

# A throwaway CA and a broker certificate for 127.0.0.1 signed by it (EC P-256: quick to make),
# the broker's PKCS#12 keystore, and random passwords for the SCRAM users, all in
# $KAFKA_TLS_DIR. Valid for 30 days; every fresh start makes new ones.
kafka_tls_make() {
    command -v openssl >/dev/null || die "openssl not found (Debian: apt-get install openssl)"
    local d=$KAFKA_TLS_DIR
    mkdir -p "$d"
    chmod 0700 "$d"
    (
        umask 077
        set -e
        openssl rand -hex 16 >"$d/keystore.password"
        openssl rand -hex 16 >"$d/$KAFKA_SASL_USER.password"
        openssl rand -hex 16 >"$d/$KAFKA_SASL_ADMIN.password"
        openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
            -keyout "$d/ca.key" -out "$d/ca.pem" -days 30 -subj "/CN=ordergate local CA" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
            -keyout "$d/broker.key" -out "$d/broker.csr" -subj "/CN=localhost"
        printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
            'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >"$d/broker.ext"
        openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
            -set_serial "0x$(openssl rand -hex 8)" -days 30 -extfile "$d/broker.ext" -out "$d/broker.pem"
        openssl pkcs12 -export -in "$d/broker.pem" -inkey "$d/broker.key" -certfile "$d/ca.pem" \
            -name broker -out "$d/broker.p12" -passout "file:$d/keystore.password"
    ) >"$KAFKA_DIR/logs/tls.log" 2>&1 || { tail -n 20 "$KAFKA_DIR/logs/tls.log" >&2; die "kafka: making the TLS certificates failed"; }
    rm -f "$d/broker.csr" "$d/broker.ext"
    # Clients need the CA certificate and the directory; neither is a secret (the keys and
    # passwords beside them stay 0600).
    chmod 0755 "$d"
    chmod 0644 "$d/ca.pem"
    # librdkafka settings for kcat -F, as the ordergate user.
    (
        umask 077
        cat >"$d/client.properties" <<EOF
bootstrap.servers=127.0.0.1:$(kafka_tls_port)
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=$KAFKA_SASL_USER
sasl.password=$(cat "$d/$KAFKA_SASL_USER.password")
ssl.ca.location=$d/ca.pem
EOF
    )
}

kafka_launch() {
    local java=${JAVA:-java}
    # Heap as asked for tests; GC flags are those of Kafka's own kafka-run-class.sh.
    (
        cd "$KAFKA_DIR"
        exec setsid "$java" -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
            -Dkafka.logs.dir="$KAFKA_DIR/logs" \
            -Dlog4j.configuration="file:$SCRIPT_DIR/kafka-log4j.properties" \
            -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_DIR/server.properties"
    ) </dev/null >>"$KAFKA_DIR/logs/kafka.out" 2>&1 9>&- &
    echo $! >"$KAFKA_PIDFILE"
}

kafka_show_log() {
    log "kafka: last lines of $KAFKA_DIR/logs/server.log:"
    tail -n 40 "$KAFKA_DIR/logs/server.log" >&2 2>/dev/null || true
    # A failed broker logs its cause first and then dozens of shutdown lines: repeat the cause.
    if grep -qsE '^\[[^]]*\] (ERROR|FATAL) ' "$KAFKA_DIR/logs/server.log"; then
        log "kafka: first errors in server.log:"
        grep -E -A 3 '^\[[^]]*\] (ERROR|FATAL) ' "$KAFKA_DIR/logs/server.log" | head -n 12 >&2 || true
    fi
    if [[ -s $KAFKA_DIR/logs/kafka.out ]]; then
        log "kafka: last lines of $KAFKA_DIR/logs/kafka.out:"
        tail -n 40 "$KAFKA_DIR/logs/kafka.out" >&2
    fi
}

# Fresh broker state: new ports, config, cluster id and formatted log dir. Stale data from a broker
# that died is thrown away rather than reused; this is a throwaway broker.
kafka_prepare() {
    local port cport tport=
    port=${ORDERGATE_KAFKA_PORT:-$(pick_port)}
    cport=$(pick_port "$port")
    if [[ $KAFKA_TLS == 1 ]]; then tport=${ORDERGATE_KAFKA_TLS_PORT:-$(pick_port "$port" "$cport")}; fi
    rm -rf "$KAFKA_DIR"
    mkdir -p "$KAFKA_DIR/data" "$KAFKA_DIR/logs"
    echo "$port" >"$KAFKA_DIR/port"
    echo "$cport" >"$KAFKA_DIR/controller.port"
    local scram=() u
    if [[ -n $tport ]]; then
        echo "$tport" >"$KAFKA_DIR/tls.port"
        kafka_tls_make
        # SCRAM credentials live in the cluster metadata; KRaft writes the first ones at format.
        for u in "$KAFKA_SASL_USER" "$KAFKA_SASL_ADMIN"; do
            scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(cat "$KAFKA_TLS_DIR/$u.password")]")
        done
    fi
    kafka_write_config "$port" "$cport" "$tport"
    local cluster_id
    cluster_id=$(kafka_cluster_id)
    echo "$cluster_id" >"$KAFKA_DIR/cluster.id"
    "${JAVA:-java}" -cp "$KAFKA_LIBS/*" -Dlog4j.configuration="file:$SCRIPT_DIR/kafka-log4j.properties" \
        -Dkafka.logs.dir="$KAFKA_DIR/logs" kafka.tools.StorageTool format \
        -t "$cluster_id" -c "$KAFKA_DIR/server.properties" "${scram[@]}" </dev/null >"$KAFKA_DIR/logs/format.log" 2>&1 9>&- ||
        { tail -n 40 "$KAFKA_DIR/logs/format.log" >&2; die "kafka: formatting $KAFKA_DIR/data failed"; }
}

# A random 16-byte cluster id in Kafka's URL-safe base64 form (saves the JVM start of
# `kafka-storage random-uuid`). Never one that starts with '-' (1 in 64 would): the format tool
# reads it as an option and refuses, and the broker does not start.
kafka_cluster_id() {
    local id=-
    while [[ $id == -* ]]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    printf '%s\n' "$id"
}

# The first wait of a start: until the broker answers, its process is gone, or START_TIMEOUT.
kafka_wait_started() {
    local deadline=$((SECONDS + START_TIMEOUT))
    while kafka_running && ! kafka_answering && ((SECONDS < deadline)); do sleep 0.5; done
}

kafka_wait_answering() { # $1 = deadline (in SECONDS)
    until kafka_answering; do
        if ! kafka_running; then
            log "kafka: broker exited during startup"
            kafka_show_log
            exit 1
        fi
        if ((SECONDS >= $1)); then
            log "kafka: no metadata answer after ${START_TIMEOUT}s"
            kafka_show_log
            exit 1
        fi
        sleep 0.5
    done
}

kafka_listeners() {
    local s="127.0.0.1:$(kafka_port)"
    if kafka_has_tls; then s+=" and SASL_SSL 127.0.0.1:$(kafka_tls_port)"; fi
    echo "$s"
}

kafka_up() {
    if kafka_running && [[ $KAFKA_TLS == 1 ]] && ! kafka_has_tls; then
        die "kafka: runs without the SASL_SSL listener ORDERGATE_KAFKA_TLS=1 asks for; run down first"
    fi
    if kafka_running && kafka_answering; then
        log "kafka: already running on $(kafka_listeners) (pid $(kafka_pid))"
        return 0
    fi
    local deadline=$((SECONDS + START_TIMEOUT)) _
    if kafka_running; then
        if [[ -n ${ORDERGATE_KAFKA_PORT:-} && $(kafka_port) != "$ORDERGATE_KAFKA_PORT" ]]; then
            die "kafka: runs on port $(kafka_port), not ORDERGATE_KAFKA_PORT=$ORDERGATE_KAFKA_PORT; run down first"
        fi
        log "kafka: process $(kafka_pid) runs but does not answer yet; waiting"
    else
        command -v "${JAVA:-java}" >/dev/null || die "java not found (Debian: apt-get install openjdk-17-jre-headless)"
        kafka_fetch
        for _ in 1 2 3; do
            kafka_prepare
            log "kafka: starting $KAFKA_VERSION on $(kafka_listeners) (controller $(cat "$KAFKA_DIR/controller.port"))"
            kafka_launch
            deadline=$((SECONDS + START_TIMEOUT))
            # Wait for either the broker to answer or the process to die.
            kafka_wait_started
            kafka_running && break
            # Only a lost race for a port is worth another try with new ones.
            if [[ -z ${ORDERGATE_KAFKA_PORT:-} && -z ${ORDERGATE_KAFKA_TLS_PORT:-} ]] &&
                grep -qs 'Address already in use' "$KAFKA_DIR/logs/server.log" "$KAFKA_DIR/logs/kafka.out"; then
                log "kafka: a port was taken meanwhile; picking others"
                continue
            fi
            break
        done
    fi

    kafka_wait_answering "$deadline"
    local started
    started=$(grep -o 'Kafka version: [^ ]*' "$KAFKA_DIR/logs/server.log" 2>/dev/null | head -n 1 || true)
    log "kafka: ready on $(kafka_listeners) (pid $(kafka_pid); ${started:-Kafka version: $KAFKA_VERSION})"
}

# Stop and start again with everything kept: ports, data, cluster id, users, certificates.
kafka_restart() {
    kafka_running || die "kafka: not running in $STATE (start with: $0 up)"
    kafka_down
    log "kafka: starting again on $(kafka_listeners)"
    kafka_launch
    kafka_wait_started
    kafka_wait_answering $((SECONDS + START_TIMEOUT))
    log "kafka: ready again on $(kafka_listeners) (pid $(kafka_pid))"
}

kafka_down() {
    [[ -d $KAFKA_DIR ]] || return 0
    kafka_running || return 0
    proc_stop kafka "$(kafka_pid)" 20
}

kafka_exports() {
    printf 'export ORDERGATE_BROKERS=%q\n' "127.0.0.1:$(kafka_port)"
    kafka_has_tls || return 0
    # What a client of the SASL_SSL listener needs (deploy/local/README.md).
    printf 'export ORDERGATE_KAFKA_TLS_BROKERS=%q\n' "127.0.0.1:$(kafka_tls_port)"
    printf 'export ORDERGATE_KAFKA_TLS_CA=%q\n' "$KAFKA_TLS_DIR/ca.pem"
    printf 'export ORDERGATE_KAFKA_TLS_USER=%q\n' "$KAFKA_SASL_USER"
    printf 'export ORDERGATE_KAFKA_TLS_PASSWORD_FILE=%q\n' "$KAFKA_TLS_DIR/$KAFKA_SASL_USER.password"
}

# ---------------------------------------------------------------------------------------------
# Kafka, three nodes (ORDERGATE_KAFKA_NODES=3)
# ---------------------------------------------------------------------------------------------

# Points the single-broker helpers (kafka_running, kafka_answering, kafka_launch, kafka_down,
# kafka_show_log) at node $1 of the cluster.
kcl_node() {
    [[ $1 =~ ^[1-3]$ ]] || die "kafka: node must be 1, 2 or 3, not '$1'"
    KAFKA_DIR=$KCL_DIR/node-$1
    KAFKA_PIDFILE=$KAFKA_DIR/kafka.pid
}

# True when the cluster of this state directory was prepared (its nodes may be down).
kcl_exists() { [[ -f $KCL_DIR/node-1/port ]]; }

kcl_brokers() {
    local n list=
    for n in 1 2 3; do list+=${list:+,}127.0.0.1:$(cat "$KCL_DIR/node-$n/port"); done
    echo "$list"
}

kcl_write_config() { # $1 = node id, $2 = broker port, $3 = controller.quorum.voters
    local cport
    cport=$(cat "$KAFKA_DIR/controller.port")
    cat >"$KAFKA_DIR/server.properties" <<EOC
# Generated by deploy/local/services.sh: node $1 of three, KRaft combined mode, for fault tests.
node.id=$1
process.roles=broker,controller
controller.quorum.voters=$3
listeners=PLAINTEXT://127.0.0.1:$2,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$2
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DIR/data

# As production runs it: three replicas of everything, and a write acknowledged (acks=all) only
# once two of them have it; a leader is never elected from a replica that fell out of sync.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
unclean.leader.election.enable=false
# A SIGKILLed node is fenced after this long without a heartbeat to the controller (default 9 s),
# so that its partitions get a new leader within a test's patience.
broker.session.timeout.ms=6000
# A follower that stops fetching leaves the in-sync set after this long (default 30 s).
replica.lag.time.max.ms=10000
EOC
    kafka_config_common >>"$KAFKA_DIR/server.properties"
}

# Fresh cluster state: three nodes, each a broker port and a controller port, one cluster id,
# each log dir formatted.
kcl_prepare() {
    local taken=() n p c voters= cluster_id
    rm -rf "$KCL_DIR"
    for n in 1 2 3; do
        kcl_node "$n"
        mkdir -p "$KAFKA_DIR/data" "$KAFKA_DIR/logs"
        p=$(pick_port "${taken[@]}")
        taken+=("$p")
        c=$(pick_port "${taken[@]}")
        taken+=("$c")
        echo "$p" >"$KAFKA_DIR/port"
        echo "$c" >"$KAFKA_DIR/controller.port"
        voters+=${voters:+,}$n@127.0.0.1:$c
    done
    cluster_id=$(kafka_cluster_id)
    echo "$cluster_id" >"$KCL_DIR/cluster.id"
    # The three formats at once: each is a JVM start of its own.
    local pids=()
    for n in 1 2 3; do
        kcl_node "$n"
        kcl_write_config "$n" "$(cat "$KAFKA_DIR/port")" "$voters"
        "${JAVA:-java}" -cp "$KAFKA_LIBS/*" -Dlog4j.configuration="file:$SCRIPT_DIR/kafka-log4j.properties" \
            -Dkafka.logs.dir="$KAFKA_DIR/logs" kafka.tools.StorageTool format \
            -t "$cluster_id" -c "$KAFKA_DIR/server.properties" </dev/null >"$KAFKA_DIR/logs/format.log" 2>&1 9>&- &
        pids+=($!)
    done
    for n in 1 2 3; do
        wait "${pids[n - 1]}" && continue
        tail -n 40 "$KCL_DIR/node-$n/logs/format.log" >&2
        die "kafka: formatting node $n failed"
    done
}

# Waits until node $1 answers a metadata request that lists all three brokers; exits on its death
# or after START_TIMEOUT.
kcl_wait_node() {
    local deadline=$((SECONDS + START_TIMEOUT))
    kcl_node "$1"
    until kafka_answering && [[ $(kcl_metadata "127.0.0.1:$(kafka_port)" | grep -cE '^ +broker [0-9]+ at') == 3 ]]; do
        if ! kafka_running; then
            log "kafka: node $1 exited during startup"
            kafka_show_log
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "kafka: node $1 gave no metadata answer listing three brokers after ${START_TIMEOUT}s"
            kafka_show_log
            exit 1
        fi
        sleep 0.5
    done
}

# Metadata of the cluster as kcat prints it (-L), asked of broker port $1 (or of every node).
kcl_metadata() {
    kcat -L -b "${1:-$(kcl_brokers)}" -m 5 ${2:+-t "$2"} 2>/dev/null
}

kcl_up() {
    command -v kcat >/dev/null || die "kcat not found (Debian: apt-get install kcat)"
    local n all=yes
    if kcl_exists; then
        for n in 1 2 3; do kcl_node "$n"; kafka_running || all=; done
        if [[ -n $all ]]; then
            for n in 1 2 3; do kcl_wait_node "$n"; done
            log "kafka: cluster already running on $(kcl_brokers)"
            return 0
        fi
        for n in 1 2 3; do kcl_node "$n"; kafka_down; done
    fi
    command -v "${JAVA:-java}" >/dev/null || die "java not found (Debian: apt-get install openjdk-17-jre-headless)"
    kafka_fetch
    local t0=$SECONDS
    kcl_prepare
    # All three at once: none finishes starting before a quorum of controllers has elected a leader.
    for n in 1 2 3; do kcl_node "$n"; kafka_launch; done
    log "kafka: starting $KAFKA_VERSION, three nodes on $(kcl_brokers), heap $KAFKA_HEAP each"
    for n in 1 2 3; do kcl_wait_node "$n"; done
    log "kafka: cluster ready on $(kcl_brokers) in $((SECONDS - t0)) s (pids $(cat "$KCL_DIR"/node-*/kafka.pid | tr '\n' ' '))"
}

kcl_down() {
    local n
    for n in 1 2 3; do
        kcl_node "$n"
        [[ -d $KAFKA_DIR ]] || continue
        if kafka_running; then proc_stop "kafka node $n" "$(kafka_pid)" 20; fi
    done
}

kcl_require() { kcl_exists || die "kafka: no three-node cluster in $STATE (start with ORDERGATE_KAFKA_NODES=3 $0 up)"; }

cmd_kill_broker() { # $@ = nodes
    kcl_require
    local n pid
    for n in "$@"; do
        kcl_node "$n"
        kafka_running || die "kafka: node $n is not running"
        pid=$(kafka_pid)
        kill -KILL "$pid"
        while proc_alive "$pid"; do sleep 0.05; done
        log "kafka: node $n SIGKILLed (pid $pid)"
    done
}

# Launches every node named first, then waits for each: two stopped nodes start together (a
# node's wait lists three brokers).
cmd_start_broker() { # $@ = nodes
    kcl_require
    local n
    for n in "$@"; do
        kcl_node "$n"
        kafka_running && continue
        kafka_launch
        log "kafka: node $n starting on 127.0.0.1:$(kafka_port) (pid $(kafka_pid))"
    done
    for n in "$@"; do
        kcl_wait_node "$n"
        log "kafka: node $n ready"
    done
}

cmd_restart_broker() { # $1 = node
    kcl_require
    kcl_node "$1"
    kafka_down
    cmd_start_broker "$1"
}

# Every "topic partition isr/replicas" with fewer in-sync replicas than replicas.
kcl_under_replicated() {
    kcl_metadata | awk '
        /^  topic "/ { t = $2; gsub(/"/, "", t) }
        /^    partition / {
            p = $2; sub(/,$/, "", p)
            r = $0; sub(/.*replicas: /, "", r); sub(/,? isrs:.*/, "", r)
            i = $0; sub(/.*isrs: /, "", i); sub(/[^0-9,].*/, "", i)
            nr = split(r, a, ","); ni = split(i, b, ",")
            if (ni < nr) printf "%s %s %d/%d\n", t, p, ni, nr
        }'
}

# Waits until no partition is under-replicated (a restarted node has caught up).
kcl_wait_in_sync() {
    local deadline=$((SECONDS + START_TIMEOUT)) out
    while out=$(kcl_under_replicated) && [[ -n $out ]]; do
        ((SECONDS < deadline)) || die "kafka: partitions still under-replicated after ${START_TIMEOUT}s: $(head -n 3 <<<"$out" | tr '\n' ';')"
        sleep 0.5
    done
}

cmd_roll_brokers() {
    kcl_require
    local n t0
    for n in 1 2 3; do
        kcl_wait_in_sync
        t0=$SECONDS
        cmd_restart_broker "$n"
        kcl_wait_in_sync
        log "kafka: node $n rolled in $((SECONDS - t0)) s, every partition in sync again"
    done
}

cmd_leader() { # $1 = topic, $2 = partition
    kcl_require
    kcl_metadata "" "$1" | awk -v p="$2" '$1 == "partition" && $2 == p "," { l = $4; sub(/,$/, "", l); if (l >= 0) print l }'
}

# The coordinator of a group is the leader of __consumer_offsets partition
# (String.hashCode(group) & 0x7fffffff) % offsets.topic.num.partitions.
cmd_coordinator() { # $1 = group
    kcl_require
    local h=0 i c nparts
    for ((i = 0; i < ${#1}; i++)); do
        printf -v c '%d' "'${1:i:1}"
        h=$(((h * 31 + c) & 0xffffffff))
    done
    nparts=$(sed -n 's/^offsets.topic.num.partitions=//p' "$KCL_DIR/node-1/server.properties")
    cmd_leader __consumer_offsets $(((h & 0x7fffffff) % nparts))
}

kcl_exports() {
    printf 'export ORDERGATE_BROKERS=%q\n' "$(kcl_brokers)"
    printf 'export ORDERGATE_KAFKA_NODES=3\n'
}

kcl_status() {
    local n
    for n in 1 2 3; do
        kcl_node "$n"
        if kafka_running; then
            echo "kafka node $n: running (pid $(kafka_pid)) on 127.0.0.1:$(kafka_port)"
        else
            echo "kafka node $n: not running (port $(kafka_port))"
        fi
    done
}

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

cmd_up() {
    wants pg || wants kafka || wants pgbouncer || wants standby ||
        die "ORDERGATE_SERVICES=$SERVICES names none of pg, kafka, pgbouncer, standby"
    lock_state
    make_state_dir
    if wants pg; then pg_up; fi
    if wants pgbouncer; then pgb_up; fi
    if wants standby; then sb_up; fi
    if wants kafka && [[ $KAFKA_NODES == 3 ]]; then
        [[ $KAFKA_TLS != 1 ]] || die "kafka: ORDERGATE_KAFKA_TLS=1 is for the single broker only"
        kcl_up
    elif wants kafka; then kafka_up; fi
    if wants pg; then pg_exports; fi
    if wants standby; then sb_exports; fi
    if wants kafka && [[ $KAFKA_NODES == 3 ]]; then kcl_exports
    elif wants kafka; then kafka_exports; fi
    if wants pgbouncer; then pgb_exports; fi
}

cmd_restart_pgbouncer() {
    lock_state
    PG_USER=$(pg_os_user)
    pgb_set_paths
    [[ -n $(pgb_port) ]] || die "pgbouncer: never started in $STATE"
    pgb_down
    ORDERGATE_PGBOUNCER_PORT=$(pgb_port) pgb_start
}

cmd_env() {
    local any=
    PG_USER=$(pg_os_user)
    pg_set_paths
    if pg_running && [[ -n $(pg_port) ]]; then pg_exports; any=yes; fi
    if kafka_running; then kafka_exports; any=yes; fi
    if kcl_exists; then kcl_exports; any=yes; fi
    pgb_set_paths
    if pgb_running; then pgb_exports; any=yes; fi
    sb_set_paths
    if sb_running; then sb_exports; any=yes; fi
    [[ -n $any ]] || die "nothing runs in $STATE (start with: $0 up)"
}

cmd_status() {
    local ok=yes
    PG_USER=$(pg_os_user)
    pg_set_paths
    echo "state: $STATE"
    if pg_running; then
        echo "postgresql: running (pid $(head -n 1 "$PG_DATA/postmaster.pid")) on 127.0.0.1:$(pg_port) and socket $PG_SOCK"
    else
        echo "postgresql: not running"
        if wants pg; then ok=; fi
    fi
    if kcl_exists; then
        kcl_status
    elif kafka_running; then
        echo "kafka: running $KAFKA_VERSION (pid $(kafka_pid)) on $(kafka_listeners)"
    else
        echo "kafka: not running"
        if wants kafka; then ok=; fi
    fi
    pgb_set_paths
    if pgb_running; then
        echo "pgbouncer: running (pid $(pgb_pid)) on 127.0.0.1:$(pgb_port), transaction pooling"
    else
        echo "pgbouncer: not running"
        if wants pgbouncer; then ok=; fi
    fi
    sb_set_paths
    if sb_running; then
        echo "standby: running (pid $(sb_postmaster_pid)) on 127.0.0.1:$(sb_port), $(sb_psql "$(sb_port)" -c "select case when pg_is_in_recovery() then 'in recovery' else 'promoted' end" 2>/dev/null)"
    else
        echo "standby: not running"
        if wants standby; then ok=; fi
    fi
    [[ -n $ok ]] || exit 3
}

cmd_down() {
    lock_state
    # Stop everything this state dir started, whatever ORDERGATE_SERVICES says now.
    kafka_down
    kcl_down
    pgb_down
    sb_down
    pg_down
    [[ -e $STATE ]] || { log "nothing in $STATE"; return 0; }
    # Guard against deleting a directory that services.sh did not create (a mistyped
    # ORDERGATE_STATE_DIR pointing at real data).
    if [[ ! -e $STATE_MARKER ]] && [[ -n $(ls -A "$STATE") ]]; then
        die "$STATE has no $(basename "$STATE_MARKER"); not removing it"
    fi
    local real
    real=$(readlink "$STATE/pg" 2>/dev/null || true)
    if [[ $real == "${TMPDIR:-/tmp}"/ordergate-pg.* ]]; then rm -rf "$real"; fi
    rm -rf "$STATE"
    log "stopped; removed $STATE"
}

usage() { # $1 = exit status
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "$1"
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    restart-kafka)
        lock_state
        kafka_restart
        ;;
    status) cmd_status ;;
    restart-pgbouncer) cmd_restart_pgbouncer ;;
    kill-primary) cmd_kill_primary ;;
    kill-broker | start-broker | restart-broker)
        [[ $# -ge 2 ]] || die "usage: $0 $1 N... (N: 1, 2 or 3)"
        [[ $1 != restart-broker || $# -eq 2 ]] || die "usage: $0 restart-broker N"
        lock_state
        cmd=$1
        shift
        case $cmd in
            kill-broker) cmd_kill_broker "$@" ;;
            start-broker) cmd_start_broker "$@" ;;
            restart-broker) cmd_restart_broker "$1" ;;
        esac
        ;;
    roll-brokers)
        lock_state
        cmd_roll_brokers
        ;;
    leader)
        [[ $# -eq 3 && $3 =~ ^[0-9]+$ ]] || die "usage: $0 leader TOPIC PARTITION"
        cmd_leader "$2" "$3"
        ;;
    coordinator)
        [[ $# -eq 2 ]] || die "usage: $0 coordinator GROUP"
        cmd_coordinator "$2"
        ;;
    under-replicated)
        kcl_require
        kcl_under_replicated
        ;;
    promote) cmd_promote ;;
    env) cmd_env ;;
    fetch)
        kafka_fetch
        log "kafka: $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $KAFKA_LIBS"
        ;;
    fetch-pom)
        [[ $# -eq 3 && -n $2 && $3 =~ ^[A-Za-z0-9._-]+$ ]] ||
            die "usage: $0 fetch-pom POM NAME (NAME: letters, digits, . _ -)"
        pom=$(realpath -- "$2")
        pom_fetch "$3" "$pom" "$CACHE_DIR/$3" ""
        echo "$CACHE_DIR/$3/libs"
        ;;
    -h | --help | help) usage 0 ;;
    *) usage 2 ;;
esac
