#!/usr/bin/env bash
# Validates ordergate's deployment files, as far as this machine can without a cluster, a Docker
# daemon or a running systemd:
#
#   - YAML: every deploy/**/*.yaml parses (PyYAML);
#   - ordergate.conf: names every setting of the table (as a built binary's --list-settings
#     prints it) with its default; every other config (compose, Kubernetes ConfigMap) uses only
#     known names; all of them pass a binary's --check-config, and a broken file is refused with
#     exit 2 and FILE:LINE (these checks are in deploy/validate_config.py);
#   - systemd: `systemd-analyze verify` on copies of the units whose ExecStart points at stubs
#     (any warning fails), and `systemd-analyze security --offline` stays at "OK";
#   - Prometheus: deploy/prometheus/test-rules.sh (`promtool check rules`, `promtool test rules`,
#     no rule on a job name, every alert tested firing and silent); every alert has a severity, a
#     summary and a runbook_url whose anchor exists in docs/alerts.md; every metric an alert
#     or the dashboard uses is documented there;
#   - Grafana: the dashboard is JSON with unique panel ids on the ${datasource} variable;
#   - Kubernetes: `kubectl kustomize` renders the directory, and renders no Secret (the real one is
#     made out of band; applying again must not replace it), `kubernetes-validate --strict` checks
#     each manifest against the API schemas, plus consistency (no namespace, selectors match
#     labels, probes that read the health file and never a port, a NetworkPolicy that admits
#     only named scrapers and only on the metrics port, non-root, CronJob policies, referenced
#     ConfigMaps exist, referenced Secret keys exist in secret.example.yaml, every PostgreSQL
#     connection has sslmode=verify-full with an sslrootcert from a mounted Secret, a SASL_SSL
#     consumer's CA and password are mounted Secret files);
#   - Compose and Dockerfile: references resolve (services, secrets, files; also of the SASL_SSL
#     overlay compose.kafka-tls.yaml, whose consumers get the Kafka CA and password as secret
#     files), `docker compose config` (with and without the overlay) when the plugin exists, the packages the Dockerfile installs exist in this Debian's
#     archive, and the built binaries need no shared library outside the runtime stage's packages.
#
# Usage: deploy/validate.sh [--build-dir DIR] [--offline]
#   --build-dir DIR  where the binaries were built (default $ORDERGATE_BUILD_DIR, else build/)
#   --offline        install and download nothing (also ORDERGATE_VALIDATE_OFFLINE=1)
#
# Tools: python3 with PyYAML is required; when missing it is installed (Debian's python3-yaml as
# root, else PyPI's PyYAML into a venv under the cache directory), or the script fails saying so.
# promtool comes from Debian's prometheus package: used from PATH, else extracted (not installed:
# no server is set up) from the package downloaded with `apt-get download` into the cache
# (deploy/prometheus/test-rules.sh does both).
# kubernetes-validate comes from PyPI into a venv in the cache. Either one missing and not
# obtainable is reported as skipped, never as passed. Cache: $ORDERGATE_CACHE_DIR, default
# ~/.cache/ordergate.
#
# Exit status: 0 when every check ran passed (skipped ones are listed), 1 when one failed, 2 on
# bad usage. Last line: "validate: N passed, N failed, N skipped".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/.." && pwd -P)
BUILD_DIR=${ORDERGATE_BUILD_DIR:-$REPO/build}
OFFLINE=${ORDERGATE_VALIDATE_OFFLINE:-0}
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE=${ORDERGATE_CACHE_DIR:-$HOME/.cache/ordergate}

while (($#)); do
    case $1 in
        --build-dir) BUILD_DIR=${2:?--build-dir needs a directory}; shift 2 ;;
        --build-dir=*) BUILD_DIR=${1#*=}; shift ;;
        --offline) OFFLINE=1; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "validate: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

PASS=0 FAIL=0 SKIP=0
ok() { PASS=$((PASS + 1)); printf 'ok    %s\n' "$*"; }
bad() { FAIL=$((FAIL + 1)); printf 'FAIL  %s\n' "$*"; }
skip() { SKIP=$((SKIP + 1)); printf 'skip  %s\n' "$*"; }
note() { printf '      %s\n' "$*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ordergate-validate.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Runs "$@" with output captured; on failure shows the last lines of it.
run_quiet() {
    local out=$TMP/run.out rc=0
    "$@" >"$out" 2>&1 || rc=$?
    ((rc == 0)) || tail -n 25 "$out" | sed 's/^/      | /'
    return "$rc"
}

may_install() { [[ $OFFLINE != 1 ]]; }

# ---------------------------------------------------------------------------------------------
# python3 with PyYAML (required)
# ---------------------------------------------------------------------------------------------
PY=
find_python() {
    local c
    for c in python3 /usr/bin/python3 "$CACHE/validate-venv/bin/python"; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import yaml' >/dev/null 2>&1; then
            PY=$(command -v "$c")
            return 0
        fi
    done
    return 1
}
if ! find_python && may_install; then
    echo "validate: python3 with PyYAML not found; installing it" >&2
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2 ||
            { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2; }
    fi
    if ! find_python && command -v python3 >/dev/null; then
        python3 -m venv "$CACHE/validate-venv" >&2 && "$CACHE/validate-venv/bin/pip" install -q PyYAML >&2
    fi
    find_python || true
fi
if [[ -z $PY ]]; then
    bad "python3 with PyYAML is required (Debian: apt-get install python3-yaml; or pip install PyYAML)"
    echo "validate: $PASS passed, $FAIL failed, $SKIP skipped"
    exit 1
fi

# ---------------------------------------------------------------------------------------------
# YAML parse
# ---------------------------------------------------------------------------------------------
mapfile -t YAMLS < <(cd "$REPO" && find deploy -path deploy/local -prune -o \
    \( -name '*.yaml' -o -name '*.yml' \) -type f -print | sort)
for f in "${YAMLS[@]}"; do
    if msg=$("$PY" -c 'import sys, yaml
with open(sys.argv[1]) as fh:
    docs = [d for d in yaml.safe_load_all(fh)]
if not docs or any(d is None for d in docs):
    sys.exit("empty document")' "$REPO/$f" 2>&1); then
        ok "yaml parses: $f"
    else
        bad "yaml parse: $f: $(tail -n 3 <<<"$msg")"
    fi
done

# ---------------------------------------------------------------------------------------------
# The built binaries: the settings table comes from one (--list-settings), configs are checked
# with one (--check-config)
# ---------------------------------------------------------------------------------------------
CHECKER= LISTER=
for b in consumer/ordergate-consumer scanner/ordergate-scanner tools/ordergatectl; do
    [[ -x $BUILD_DIR/$b ]] || continue
    [[ -n $CHECKER ]] || CHECKER=$BUILD_DIR/$b
    [[ -n $LISTER || $b == tools/* ]] || LISTER=$BUILD_DIR/$b
done
SETTINGS=
if [[ -n $LISTER ]]; then
    if "$LISTER" --list-settings >"$TMP/settings.tsv" 2>"$TMP/settings.err"; then
        SETTINGS=$TMP/settings.tsv
    else
        bad "$(basename "$LISTER") --list-settings failed: $(head -c 300 "$TMP/settings.err")"
    fi
fi

# ---------------------------------------------------------------------------------------------
# Structure and consistency checks (deploy/validate_config.py); prints "ok|FAIL|skip<TAB>message"
# ---------------------------------------------------------------------------------------------
while IFS=$'\t' read -r kind msg; do
    case $kind in
        ok) ok "$msg" ;;
        FAIL) bad "$msg" ;;
        skip) skip "$msg" ;;
        *) bad "validate_config.py: $kind $msg" ;;
    esac
done < <("$PY" "$HERE/validate_config.py" "$REPO" "$TMP" ${SETTINGS:+"$SETTINGS"} 2>&1 ||
    echo "FAIL	validate_config.py stopped with an error (see above)")

# ---------------------------------------------------------------------------------------------
# --check-config through a built binary
# ---------------------------------------------------------------------------------------------
if [[ -z $CHECKER ]]; then
    skip "--check-config: no ordergate binary built in $BUILD_DIR (pass --build-dir)"
else
    [[ $CHECKER == */ordergate-consumer ]] || note "ordergate-consumer is not built; checking with $(basename "$CHECKER") (same config table)"
    for f in "$REPO/deploy/ordergate.conf" "$REPO/deploy/docker/ordergate.compose.conf" \
        "$REPO/deploy/docker/ordergate.compose-tls.conf" "$TMP/configmap-ordergate.conf"; do
        name=${f#"$REPO"/}
        [[ $f == "$TMP"/* ]] && name="deploy/k8s/configmap.yaml (ordergate.conf)"
        if [[ ! -f $f ]]; then bad "--check-config $name: file missing"; continue; fi
        if run_quiet "$CHECKER" --config "$f" --check-config; then
            ok "--check-config accepts $name ($(basename "$CHECKER"))"
        else
            bad "--check-config refuses $name"
        fi
    done
    # A broken file must be refused with exit 2 and FILE:LINE, or the check above proves nothing.
    printf 'log_level = "info";\nconsumer = {\n    batchsize = 10;\n};\n' >"$TMP/broken.conf"
    "$CHECKER" --config "$TMP/broken.conf" --check-config >"$TMP/broken.out" 2>&1
    rc=$?
    if [[ $rc -eq 2 ]] && grep -q "broken.conf:3" "$TMP/broken.out"; then
        ok "--check-config refuses an unknown setting with exit 2 and FILE:LINE"
    else
        bad "--check-config on a broken file: exit $rc, output: $(head -c 300 "$TMP/broken.out")"
    fi
fi

# ---------------------------------------------------------------------------------------------
# systemd
# ---------------------------------------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
    skip "systemd-analyze not found (Debian: package systemd): units not verified"
else
    SD=$TMP/systemd
    mkdir -p "$SD/bin"
    for b in ordergate-consumer ordergate-scanner ordergate-console ordergatectl; do
        printf '#!/bin/sh\nexit 0\n' >"$SD/bin/$b"
        chmod +x "$SD/bin/$b"
    done
    units=()
    for f in "$REPO"/deploy/systemd/*.service "$REPO"/deploy/systemd/*.timer; do
        sed "s#/usr/local/bin/#$SD/bin/#g" "$f" >"$SD/$(basename "$f")"
        case $f in
            *@.service) units+=("$SD/$(basename "${f%@.service}")@a.service") ;;
            *) units+=("$SD/$(basename "$f")") ;;
        esac
    done
    for u in "${units[@]}"; do
        out=$(cd "$SD" && systemd-analyze verify "$u" 2>&1)
        rc=$?
        if [[ $rc -eq 0 && -z $out ]]; then
            ok "systemd-analyze verify $(basename "$u")"
        else
            bad "systemd-analyze verify $(basename "$u") (exit $rc): $out"
        fi
    done
    for u in ordergate-consumer.service ordergate-scanner.service ordergate-reconcile.service \
        ordergate-console.service; do
        # Exposure 0..10 is reported; --threshold is the same scale times ten. 2.0 and below is "OK".
        if out=$(systemd-analyze security --offline=true --threshold=20 "$SD/$u" 2>&1); then
            ok "systemd-analyze security $u: $(grep -o 'exposure level[^:]*: [0-9.]* [A-Z]*' <<<"$out" | sed 's/.*: //')"
        elif grep -q 'Overall exposure' <<<"$out"; then
            bad "systemd-analyze security $u: $(grep 'Overall exposure' <<<"$out")"
        else
            skip "systemd-analyze security --offline not supported here: $(tail -n 1 <<<"$out")"
        fi
    done
fi

# ---------------------------------------------------------------------------------------------
# Alert rules: deploy/prometheus/test-rules.sh (promtool check rules and test rules, no rule on
# a job name, every alert tested firing and silent). It finds promtool (PATH, the cache, else
# extracted from Debian's prometheus package); here a missing promtool is a skip, in ctest
# deploy_alerts it is a failure.
# ---------------------------------------------------------------------------------------------
RULES=$HERE/prometheus/test-rules.sh
PT_ARGS=()
[[ $OFFLINE == 1 ]] && PT_ARGS=(--offline)
if ! PROMTOOL=$(ORDERGATE_CACHE_DIR=$CACHE "$RULES" --which "${PT_ARGS[@]}"); then
    skip "promtool not available (Debian: apt-get install prometheus, or run without --offline): rules not checked by promtool"
else
    rc=0
    PROMTOOL=$PROMTOOL "$RULES" >"$TMP/rules.out" 2>&1 || rc=$?
    fails=0
    while IFS= read -r line; do
        case $line in
            "ok    "*) ok "${line#ok    }" ;;
            "FAIL  "*) bad "${line#FAIL  }"; fails=$((fails + 1)) ;;
            "test-rules: "*) ;;
            *) printf '%s\n' "$line" ;;
        esac
    done <"$TMP/rules.out"
    ((rc == 0 || fails > 0)) || bad "deploy/prometheus/test-rules.sh exited $rc"
fi

# ---------------------------------------------------------------------------------------------
# Kubernetes: kustomize render, schema validation
# ---------------------------------------------------------------------------------------------
if command -v kubectl >/dev/null; then
    if run_quiet timeout 120 kubectl kustomize "$REPO/deploy/k8s"; then
        ok "kubectl kustomize deploy/k8s renders ($(grep -c '^kind:' "$TMP/run.out") objects)"
        # What `kubectl apply -k` would write: never a Secret (it would replace the real one).
        if grep -q '^kind: Secret$' "$TMP/run.out"; then
            bad "kubectl kustomize deploy/k8s renders a Secret: apply -k would overwrite the real one"
        else
            ok "kubectl kustomize deploy/k8s renders no Secret"
        fi
    else
        bad "kubectl kustomize deploy/k8s"
    fi
else
    skip "kubectl not found: kustomization not rendered"
fi
KV=$(command -v kubernetes-validate || true)
[[ -n $KV || ! -x $CACHE/validate-venv/bin/kubernetes-validate ]] || KV=$CACHE/validate-venv/bin/kubernetes-validate
if [[ -z $KV ]] && may_install && command -v python3 >/dev/null; then
    echo "validate: installing kubernetes-validate (PyPI) into $CACHE/validate-venv" >&2
    { [[ -x $CACHE/validate-venv/bin/pip ]] || python3 -m venv "$CACHE/validate-venv"; } >&2 &&
        timeout 600 "$CACHE/validate-venv/bin/pip" install -q kubernetes-validate PyYAML >&2 &&
        KV=$CACHE/validate-venv/bin/kubernetes-validate
    [[ -x ${KV:-/nonexistent} ]] || { KV=; note "pip install kubernetes-validate failed"; }
fi
if [[ -z $KV ]]; then
    skip "kubernetes-validate not available (pip install kubernetes-validate): manifests not checked against the API schemas"
else
    mapfile -t KFILES < <(find "$REPO/deploy/k8s" -name '*.yaml' ! -name kustomization.yaml | sort)
    if run_quiet "$KV" --strict --quiet "${KFILES[@]}"; then
        ok "kubernetes-validate --strict: ${#KFILES[@]} manifests match the API schemas ($("$KV" --version 2>&1 | tail -n 1))"
    else
        bad "kubernetes-validate --strict deploy/k8s"
    fi
fi

# ---------------------------------------------------------------------------------------------
# Compose and the image
# ---------------------------------------------------------------------------------------------
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
    mkdir -p "$TMP/compose/secrets"
    cp "$REPO/deploy/docker/compose.yaml" "$REPO/deploy/docker/ordergate.compose.conf" \
        "$REPO/deploy/docker/compose.kafka-tls.yaml" "$REPO/deploy/docker/ordergate.compose-tls.conf" "$TMP/compose/"
    for s in postgres_password ordergate_app_password kafka_ca kafka_sasl_password; do
        : >"$TMP/compose/secrets/$s"
    done
    sed -i "s#context: \.\./\.\.#context: $REPO#" "$TMP/compose/compose.yaml"
    if run_quiet docker compose -f "$TMP/compose/compose.yaml" config -q; then
        ok "docker compose config deploy/docker/compose.yaml"
    else
        bad "docker compose config deploy/docker/compose.yaml"
    fi
    if ORDERGATE_KAFKA_BROKERS=kafka:9093 run_quiet docker compose -f "$TMP/compose/compose.yaml" \
        -f "$TMP/compose/compose.kafka-tls.yaml" config -q; then
        ok "docker compose config deploy/docker/compose.yaml with compose.kafka-tls.yaml"
    else
        bad "docker compose config deploy/docker/compose.yaml with compose.kafka-tls.yaml"
    fi
else
    skip "docker compose plugin not available: compose.yaml checked by the structure checks only"
fi

if command -v apt-cache >/dev/null && [[ -n $(apt-cache policy librdkafka1 2>/dev/null | grep -m1 'Candidate: [0-9]') ]]; then
    missing=()
    while read -r p; do
        [[ -n $p ]] || continue
        # No `| grep -q`: under pipefail, apt-cache's SIGPIPE would count as "missing".
        [[ $(apt-cache policy "$p" </dev/null 2>/dev/null) == *"Candidate: "[0-9]* ]] || missing+=("$p")
    done < <(sort -u "$TMP/packages")
    if ((${#missing[@]} == 0)); then
        ok "Dockerfile: all $(sort -u "$TMP/packages" | wc -l) packages exist in this machine's Debian archive ($(. /etc/os-release && echo "$VERSION_CODENAME"))"
    else
        bad "Dockerfile: packages not in this Debian archive: ${missing[*]}"
    fi
else
    skip "apt-cache has no package lists (apt-get update): Dockerfile package names not checked"
fi

# The runtime stage must carry every shared library the binaries link directly (their NEEDED
# entries; what those need in turn comes with the packages' own dependencies): map each to its
# Debian package, which must be one the runtime stage installs, or libc6/libgcc-s1.
built=()
for b in consumer/ordergate-consumer scanner/ordergate-scanner tools/ordergatectl; do
    [[ -x $BUILD_DIR/$b ]] && built+=("$BUILD_DIR/$b")
done
if ((${#built[@]} == 0)) || ! command -v dpkg >/dev/null || ! command -v ldd >/dev/null ||
    ! command -v objdump >/dev/null; then
    skip "runtime libraries: no built binary in $BUILD_DIR (or no dpkg, ldd, objdump)"
else
    probs=()
    for b in "${built[@]}"; do
        ldd "$b" </dev/null | awk '$2 == "=>" {print $1, $3}' >"$TMP/ldd"
        while read -r lib; do
            path=$(awk -v l="$lib" '$1 == l {print $2}' "$TMP/ldd")
            [[ $path == /* ]] || { probs+=("$(basename "$b"): $lib not found"); continue; }
            pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
            [[ -n $pkg ]] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
            case $pkg in
                libc6 | libgcc-s1) ;;
                *) grep -qx "$pkg" "$TMP/runtime-packages" || probs+=("$(basename "$b"): $lib from ${pkg:-?}") ;;
            esac
        done < <(objdump -p "$b" | awk '$1 == "NEEDED" {print $2}')
    done
    if ((${#probs[@]} == 0)); then
        ok "runtime libraries: ${#built[@]} built binaries need only packages of the runtime stage"
    else
        bad "runtime libraries missing from the Dockerfile's runtime stage: ${probs[*]}"
    fi
fi

echo "validate: $PASS passed, $FAIL failed, $SKIP skipped"
((FAIL == 0))
