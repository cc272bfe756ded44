#!/usr/bin/env bash
# The test command: installs what is missing, fetches the Kafka jars, checks the
# formatting, builds twice (normal and AddressSanitizer+UBSan) with warnings as
# errors and compiles a Release build, starts a throwaway PostgreSQL 15 and a
# single-node Kafka, runs every test in build/ and, in build-asan/, every test that
# runs C of that build (the SQL, isolation, fuzz and deployment checks, and the
# drills whose C other tests already cover, run once), and stops the services
# again, also on failure or Ctrl-C.
#
#   tests/run.sh                 everything
#   tests/run.sh -R consumer     only tests whose name matches (passed to ctest)
#   tests/run.sh -L unit         only a label (unit, db, kafka, isolation, drill, deploy, console, fuzz)
#   tests/run.sh --quick         the quick loop, under two minutes on 2 cores: formatting, build/
#                                (the unit_tests target only: what `ctest -L unit` runs), the unit
#                                tests; no services, no sanitizer or Release build, no Kafka jars,
#                                and no package beyond what the build needs. Further arguments
#                                go to ctest (tests/run.sh --quick -R codec).
#
# Environment:
#   ORDERGATE_USE_EXISTING=1     use the PostgreSQL (PGHOST, PGPORT, PGUSER; a superuser
#                                that may create databases), Kafka (ORDERGATE_BROKERS, and
#                                for the tls_ tests its SASL_SSL listener: ORDERGATE_KAFKA_TLS_*
#                                as deploy/local/services.sh prints them) and PgBouncer in
#                                transaction pooling mode in front of that PostgreSQL
#                                (ORDERGATE_PGBOUNCER_PORT, on 127.0.0.1) already in the
#                                environment instead of starting new ones
#   ORDERGATE_NO_ASAN=1          skip the sanitizer build
#   ORDERGATE_NO_RELEASE=1       skip the compile-only Release build
#   ORDERGATE_JOBS=N             parallel build jobs (default: nproc); --quick's ctest jobs too
#   ORDERGATE_TEST_JOBS=N        parallel ctest jobs (default: 2 x ORDERGATE_JOBS; most tests wait)
#   ORDERGATE_CLUSTER=1          also run the three-broker drill (label cluster, about 4 minutes)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
jobs=${ORDERGATE_JOBS:-$(nproc)}
t_start=$(date +%s)
step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - t_start))"; }
quick=0
if [ "${1:-}" = --quick ]; then
    quick=1
    shift
fi

# ------------------------------------------------------------------------------------------
# 1. Dependencies (Debian packages)
# ------------------------------------------------------------------------------------------
# What the build and the formatting check need (all --quick installs), then what the services
# and the other tests need.
debs=(build-essential cmake ninja-build pkg-config git clang-format
      librdkafka-dev libpq-dev libconfig-dev libcmocka-dev libjansson-dev libmicrohttpd-dev)
[ $quick = 1 ] ||
    debs+=(postgresql-15 postgresql-client-15 kcat openssl clang libclang-rt-14-dev
           openjdk-17-jdk-headless maven python3 python3-yaml python3-psycopg2 systemd prometheus
           pgbouncer chromium chromium-driver python3-venv golang-go)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# A JDK (Kafka's broker; examples/mall compiles its Java service) or Maven installed outside
# Debian's packages serves as well.
if command -v javac >/dev/null; then missing=("${missing[@]/openjdk-17-jdk-headless}"); fi
if command -v mvn >/dev/null; then missing=("${missing[@]/maven}"); fi
# A Go toolchain installed outside Debian's packages builds Toxiproxy as well.
if command -v go >/dev/null; then missing=("${missing[@]/golang-go}"); fi
read -r -a missing <<<"${missing[*]:-}"
if [ ${#missing[@]} -gt 0 ]; then
    step "installing ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    else
        echo "missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# ------------------------------------------------------------------------------------------
# 2. Formatting (the committed .clang-format)
# ------------------------------------------------------------------------------------------
step "checking formatting"
mapfile -t sources < <(git ls-files '*.c' '*.h')
if [ ${#sources[@]} -gt 0 ]; then
    clang-format --dry-run --Werror "${sources[@]}"
fi

# ------------------------------------------------------------------------------------------
# 3. The quick loop ends here: build/'s unit tests, with no service reachable through the
#    environment (a unit test that reached for one fails here instead of passing on a developer's
#    machine that happens to run them).
# ------------------------------------------------------------------------------------------
if [ $quick = 1 ]; then
    step "building build (unit_tests)"
    cmake -S . -B build -G Ninja -DOG_WERROR=ON >/dev/null
    cmake --build build -j "$jobs" --target unit_tests
    step "ctest -L unit in build"
    status=0
    (cd build &&
        env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGPASSWORD -u PGDATABASE \
            -u PGSERVICE -u ORDERGATE_DB -u ORDERGATE_BROKERS -u ORDERGATE_KAFKA_TLS_BROKERS \
            -u ORDERGATE_PGBOUNCER_PORT \
            ctest --output-on-failure -j "$jobs" -L unit "$@") || status=1
    step "done: $([ $status -eq 0 ] && echo passed || echo FAILED)"
    exit $status
fi

# ------------------------------------------------------------------------------------------
# 4. Kafka jars; the services start while build/ compiles
# ------------------------------------------------------------------------------------------
late_pid=
svc_started=0
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # The sanitizer and Release builds compile in their own process group (below).
    if [ -n "$late_pid" ]; then kill -- "-$late_pid" 2>/dev/null || true; fi
    rm -f "${cores_spec:-}"
    if [ $svc_started = 1 ]; then
        # A start still under way finishes first, so that nothing it starts outlives the run.
        if [ -n "${svc_pid:-}" ]; then wait "$svc_pid" 2>/dev/null || true; fi
        step "stopping services"
        deploy/local/services.sh down || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Toxiproxy for the chaos drill (ctest drill_chaos, label chaos), built once into the cache with
# the Go toolchain; a build that fails here makes that test fail (it tries again), never skip.
step "Toxiproxy for the chaos drill (cached)"
deploy/local/toxiproxy.sh install >/dev/null ||
    echo "run.sh: deploy/local/toxiproxy.sh install failed: drill_chaos will fail" >&2
if [ "${ORDERGATE_USE_EXISTING:-0}" != 1 ]; then
    step "fetching Kafka jars (cached)"
    deploy/local/services.sh fetch
    export ORDERGATE_STATE_DIR=${ORDERGATE_TEST_STATE_DIR:-${TMPDIR:-/tmp}/ordergate-test.$$}
    svc_env=$(mktemp)
    svc_log=$(mktemp)
    step "starting PostgreSQL, PgBouncer and Kafka in $ORDERGATE_STATE_DIR (while build/ compiles)"
    # PgBouncer (transaction pooling) for the tests that run through it; the broker also gets its
    # SASL_SSL listener, for the tls_ tests. Most of the start is the broker's JVM waking up.
    svc_started=1
    ORDERGATE_KAFKA_TLS=1 ORDERGATE_SERVICES=${ORDERGATE_SERVICES:-pg,kafka,pgbouncer} \
        deploy/local/services.sh up >"$svc_env" 2>"$svc_log" &
    svc_pid=$!
fi

# ------------------------------------------------------------------------------------------
# 5. Builds: build/ first; build-asan/ and build-release/ compile while build/'s tests run
# ------------------------------------------------------------------------------------------
step "building build"
cmake -S . -B build -G Ninja -DOG_WERROR=ON >/dev/null
cmake --build build -j "$jobs"

# The tests mostly wait (broker group joins, timeouts, child processes), so the two later builds
# use the cores they leave idle; niced, so a test's own deadlines see little of them. The
# sanitizer build's tests wait for it. A Release build of the shipped programs compiles too
# (gcc -O3 finds uninitialised-use paths the other builds do not): warnings as errors, not
# tested (ORDERGATE_NO_RELEASE=1 skips it).
late=()
[ "${ORDERGATE_NO_ASAN:-0}" = 1 ] || late+=(build-asan)
[ "${ORDERGATE_NO_RELEASE:-0}" = 1 ] || late+=(build-release)
if [ ${#late[@]} -gt 0 ]; then
    late_log=$(mktemp)
    step "building ${late[*]} in the background (log: $late_log)"
    setsid bash -c '
        set -euo pipefail
        jobs=$1
        shift
        for b in "$@"; do
            case $b in
                build-asan) extra=(-DOG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug) ;;
                build-release) extra=(-DCMAKE_BUILD_TYPE=Release) ;;
            esac
            # The Release build compiles what a packager ships (the four programs and the
            # libraries they link): the tests and benchmarks are compiled twice already.
            targets=()
            [ "$b" = build-release ] &&
                targets=(--target ordergate-consumer ordergate-scanner ordergatectl ordergate-console)
            echo "==> building $b"
            cmake -S . -B "$b" -G Ninja -DOG_WERROR=ON "${extra[@]}" >/dev/null
            nice -n 10 cmake --build "$b" -j "$jobs" "${targets[@]}"
        done' late-builds "$jobs" "${late[@]}" >"$late_log" 2>&1 &
    late_pid=$!
fi

# ------------------------------------------------------------------------------------------
# 6. Services
# ------------------------------------------------------------------------------------------
if [ "${ORDERGATE_USE_EXISTING:-0}" != 1 ]; then
    svc_status=0
    wait "$svc_pid" || svc_status=$?
    cat "$svc_log" >&2
    if [ $svc_status -ne 0 ]; then
        echo "run.sh: deploy/local/services.sh up failed ($svc_status)" >&2
        exit 1
    fi
    eval "$(cat "$svc_env")"
    rm -f "$svc_env" "$svc_log"
    svc_pid=
fi
echo "PGHOST=${PGHOST:-} PGPORT=${PGPORT:-} ORDERGATE_BROKERS=${ORDERGATE_BROKERS:-}" \
    "ORDERGATE_KAFKA_TLS_BROKERS=${ORDERGATE_KAFKA_TLS_BROKERS:-}" \
    "ORDERGATE_PGBOUNCER_PORT=${ORDERGATE_PGBOUNCER_PORT:-}"

# ------------------------------------------------------------------------------------------
# 7. Tests, in each build
# ------------------------------------------------------------------------------------------
# Most tests wait far more than they compute, so ctest runs 2 per core (ORDERGATE_TEST_JOBS).
# The CPU-bound ones (OG_CPU_BOUND_TESTS in tests/CMakeLists.txt) each take one of the `cores`
# slots of this resource spec, one per core: at most one of them per core, waiting tests beside
# them. Leaks, ASan and UBSan findings all fail the test that hit them.
test_jobs=${ORDERGATE_TEST_JOBS:-$((2 * jobs))}
cores_spec=$(mktemp)
{
    printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": ['
    for ((i = 0; i < jobs; i++)); do
        printf '%s{"id": "%d", "slots": 1}' "$([ $i = 0 ] || echo ', ')" "$i"
    done
    printf ']}]}\n'
} >"$cores_spec"
ctest_args=(--output-on-failure -j "$test_jobs" --resource-spec-file "$cores_spec")
# The three-broker drill (label cluster) starts three Kafka JVMs of its own and takes about four
# minutes on 2 cores: the 15-minute run leaves it out, and says so.
if [ "${ORDERGATE_CLUSTER:-0}" != 1 ]; then
    ctest_args+=(-LE cluster)
    echo "run.sh: drill_cluster (label cluster, three brokers, about 4 minutes) is left out;" \
        "ORDERGATE_CLUSTER=1 tests/run.sh runs it too"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
step "ctest in build"
if ! (cd build && ctest "${ctest_args[@]}" "$@"); then
    status=1
fi
if [ -n "$late_pid" ]; then
    step "waiting for ${late[*]}"
    late_status=0
    wait "$late_pid" || late_status=$?
    late_pid=
    cat "$late_log"
    rm -f "$late_log"
    if [ $late_status -ne 0 ]; then
        echo "run.sh: building ${late[*]} failed ($late_status)" >&2
        exit 1
    fi
fi
if [ "${ORDERGATE_NO_ASAN:-0}" != 1 ]; then
    step "ctest in build-asan"
    if ! (cd build-asan && ctest "${ctest_args[@]}" "$@"); then
        status=1
    fi
fi
step "done: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
