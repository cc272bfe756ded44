#!/usr/bin/env bash
# Checks and tests the alert rules (ctest deploy_alerts; deploy/validate.sh runs it too):
#
#   - `promtool check rules alerts.yaml`;
#   - `promtool test rules alerts.test.yaml`: the unit tests, silent cases included;
#   - no rule selects on a scrape job (`job=...`): the rules know the parts by their metrics,
#     whatever the operator named the jobs;
#   - every alert has a test case that expects it to fire, so none is untested or unreachable.
#
# Usage: deploy/prometheus/test-rules.sh [--offline] [--which]
#   --offline  download nothing (also ORDERGATE_VALIDATE_OFFLINE=1)
#   --which    only print the path of promtool (found or fetched), exit 1 without one
#
# promtool: $PROMTOOL, else from PATH (Debian: apt-get install prometheus), else the copy that
# this script extracts from Debian's prometheus package (`apt-get download`, nothing installed,
# no server set up) into $ORDERGATE_CACHE_DIR/promtool (default ~/.cache/ordergate/promtool).
# Without promtool the test FAILS: it never passes by skipping.
#
# Output: one "ok    ..." or "FAIL  ..." line per check. Exit 0 when all passed, 1 otherwise,
# 2 on bad usage.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
OFFLINE=${ORDERGATE_VALIDATE_OFFLINE:-0}
WHICH=0
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE=${ORDERGATE_CACHE_DIR:-$HOME/.cache/ordergate}

while (($#)); do
    case $1 in
        --offline) OFFLINE=1; shift ;;
        --which) WHICH=1; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "test-rules: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

find_promtool() {
    local cached=$CACHE/promtool/root/usr/bin/promtool
    if [[ -n ${PROMTOOL:-} ]]; then
        [[ -x $PROMTOOL ]] && { echo "$PROMTOOL"; return 0; }
        echo "test-rules: PROMTOOL=$PROMTOOL is not an executable" >&2
        return 1
    fi
    command -v promtool && return 0
    [[ -x $cached ]] && { echo "$cached"; return 0; }
    [[ $OFFLINE != 1 ]] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
    echo "test-rules: fetching promtool from Debian's prometheus package into $CACHE/promtool" >&2
    mkdir -p "$CACHE/promtool" || return 1
    (cd "$CACHE/promtool" && rm -f prometheus_*.deb && timeout 300 apt-get download -q prometheus >&2 &&
        rm -rf root && dpkg-deb -x prometheus_*.deb root && rm -f prometheus_*.deb) || true
    [[ -x $cached ]] && { echo "$cached"; return 0; }
    echo "test-rules: apt-get download prometheus failed (apt-get update first?)" >&2
    return 1
}

PT=$(find_promtool)
if ((WHICH)); then
    [[ -n $PT ]] && echo "$PT"
    [[ -n $PT ]]
    exit
fi

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); printf 'ok    %s\n' "$*"; }
bad() { FAIL=$((FAIL + 1)); printf 'FAIL  %s\n' "$*"; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ordergate-rules.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Runs "$@" in this directory (rule_files in the tests are relative to it); on failure shows
# the last lines of its output.
run_here() {
    local rc=0
    (cd "$HERE" && "$@") >"$TMP/out" 2>&1 || rc=$?
    ((rc == 0)) || tail -n 40 "$TMP/out" | sed 's/^/      | /'
    return "$rc"
}

if [[ -z $PT ]]; then
    bad "promtool not found (Debian: apt-get install prometheus; or PROMTOOL=/path/to/promtool): the rules are untested"
else
    printf '      promtool: %s (%s)\n' "$PT" "$("$PT" --version 2>&1 | head -n 1)"
    if run_here "$PT" check rules alerts.yaml; then
        ok "promtool check rules deploy/prometheus/alerts.yaml ($(grep -o '[0-9]* rules found' "$TMP/out"))"
    else
        bad "promtool check rules deploy/prometheus/alerts.yaml"
    fi
    if run_here "$PT" test rules alerts.test.yaml; then
        ok "promtool test rules deploy/prometheus/alerts.test.yaml"
    else
        bad "promtool test rules deploy/prometheus/alerts.test.yaml"
    fi
fi

# Structure of the rules and their tests (PyYAML: Debian's python3-yaml).
if ! python3 -c 'import yaml' 2>/dev/null; then
    bad "python3 with PyYAML is required (Debian: apt-get install python3-yaml)"
else
    while IFS=$'\t' read -r kind msg; do
        case $kind in
            ok) ok "$msg" ;;
            *) bad "$msg" ;;
        esac
    done < <(python3 - "$HERE" <<'EOF' 2>&1 || echo "FAIL	rule structure checks stopped with an error (see above)"
import os, re, sys
import yaml

here = sys.argv[1]
rules = yaml.safe_load(open(os.path.join(here, "alerts.yaml")))
tests = yaml.safe_load(open(os.path.join(here, "alerts.test.yaml")))
def out(good, msg, detail=""):
    print(("ok" if good else "FAIL") + "\t" + msg + ("" if good or not detail else f": {detail}"))

items = [r for g in rules.get("groups", []) for r in g.get("rules", [])]
alerts = [r["alert"] for r in items if "alert" in r]
# A label matcher on job (job="...", job!~"...") in any rule, recording rules included.
on_job = [r.get("alert") or r.get("record") for r in items
          if re.search(r'[{,]\s*job\s*(=|!=|=~|!~)', r["expr"])]
out(not on_job, f"no rule selects on a scrape job name ({len(items)} rules)", f"{on_job}")

fired, silent = set(), set()
for t in tests.get("tests", []):
    for a in t.get("alert_rule_test", []):
        (fired if a.get("exp_alerts") else silent).add(a["alertname"])
unknown = sorted((fired | silent) - set(alerts))
out(not unknown, "the tests name only alerts of alerts.yaml", f"{unknown}")
never = sorted(set(alerts) - fired)
out(not never, f"every alert has a test that expects it to fire ({len(alerts)} alerts)", f"untested: {never}")
quiet = sorted(set(alerts) - silent)
out(not quiet, "every alert has a test that expects it silent", f"never tested silent: {quiet}")
EOF
    )
fi

echo "test-rules: $PASS passed, $FAIL failed"
((FAIL == 0))
